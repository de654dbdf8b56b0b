// The graph view with go-to-source: the server's `exportlens.graph` answer (one row per
// node: name, op, dtype/shape, `file.py:LINE`) as a read-only virtual document (scheme
// `exportlens-nodes`). Each row's `file.py:LINE` is a document link (Ctrl+click) and a
// definition (F12, Ctrl+click, peek) of the source line the node came from. The same
// view shows "what did this line become" (`line` in the query). It is re-read when a
// new export result arrives for the source file or any file its rows point at.
import {
    CancellationToken,
    DefinitionProvider,
    Disposable,
    DocumentLink,
    DocumentLinkProvider,
    EventEmitter,
    Location,
    Position,
    Range,
    TextDocument,
    TextDocumentContentProvider,
    Uri,
    languages,
    window,
    workspace,
} from 'vscode';
import {
    GraphAnswer,
    GraphLink,
    GraphQuery,
    graphCommandArgs,
    linkAt,
    parseGraphAnswer,
    parseViewQuery,
    viewName,
} from './graphAnswer';
import { errorText } from './graphDocument';
import type { ServerController } from './server';

export const NODES_SCHEME = 'exportlens-nodes';

export function viewUri(query: GraphQuery): Uri {
    const source = Uri.parse(query.uri);
    return Uri.from({ scheme: NODES_SCHEME, path: viewName(source.path, query), query: JSON.stringify(query) });
}

function toRange(r: GraphLink['range']): Range {
    return new Range(r.start.line, r.start.character, r.end.line, r.end.character);
}

/** Where a link jumps: the file with the line (and column) in the fragment VS Code's opener reads. */
function linkTarget(link: GraphLink): Uri {
    const { line, character } = link.range.start;
    return Uri.parse(link.uri).with({ fragment: `L${line + 1},${character + 1}` });
}

export class GraphViews implements TextDocumentContentProvider, DocumentLinkProvider, DefinitionProvider, Disposable {
    private readonly changes = new EventEmitter<Uri>();
    readonly onDidChange = this.changes.event;
    /** The last answer per open view (its URI string): the links of the text shown. */
    private readonly answers = new Map<string, GraphAnswer>();
    private readonly subscriptions: Disposable[] = [];

    constructor(private readonly server: ServerController) {
        const selector = { scheme: NODES_SCHEME };
        this.subscriptions.push(
            workspace.registerTextDocumentContentProvider(NODES_SCHEME, this),
            languages.registerDocumentLinkProvider(selector, this),
            languages.registerDefinitionProvider(selector, this),
            languages.onDidChangeDiagnostics((event) => this.refresh(new Set(event.uris.map((u) => u.toString())))),
            workspace.onDidCloseTextDocument((doc) => this.answers.delete(doc.uri.toString())),
        );
    }

    /** Re-read the open views whose source, or a file their rows point at, changed. */
    private refresh(changed: Set<string>): void {
        for (const doc of workspace.textDocuments) {
            if (doc.uri.scheme !== NODES_SCHEME) {
                continue;
            }
            const query = parseViewQuery(doc.uri.query);
            const links = this.answers.get(doc.uri.toString())?.links ?? [];
            if (query !== undefined && (changed.has(query.uri) || links.some((l) => changed.has(l.uri)))) {
                this.changes.fire(doc.uri);
            }
        }
    }

    async provideTextDocumentContent(uri: Uri): Promise<string> {
        const query = parseViewQuery(uri.query);
        if (query === undefined) {
            return `# exportlens: not a graph view: ${uri.toString()}\n`;
        }
        let answer: GraphAnswer | string;
        try {
            answer = parseGraphAnswer(await this.server.execute('exportlens.graph', graphCommandArgs(query)));
        } catch (error) {
            answer = errorText(error);
        }
        if (typeof answer === 'string') {
            this.answers.delete(uri.toString());
            // Shown in the document itself, so a reopened tab says why it is empty.
            return `# exportlens: no graph for ${query.uri}\n# ${answer}\n`;
        }
        this.answers.set(uri.toString(), answer);
        return answer.text;
    }

    provideDocumentLinks(doc: TextDocument): DocumentLink[] {
        const links = this.answers.get(doc.uri.toString())?.links ?? [];
        return links.map((link) => {
            const out = new DocumentLink(new Range(link.line, link.start, link.line, link.end), linkTarget(link));
            out.tooltip = 'Go to the source line';
            return out;
        });
    }

    provideDefinition(doc: TextDocument, position: Position, _token: CancellationToken): Location | undefined {
        const links = this.answers.get(doc.uri.toString())?.links ?? [];
        const link = linkAt(links, position.line, position.character);
        return link === undefined ? undefined : new Location(Uri.parse(link.uri), toRange(link.range));
    }

    async open(query: GraphQuery): Promise<void> {
        const doc = await workspace.openTextDocument(viewUri(query));
        await window.showTextDocument(doc, { preview: true, preserveFocus: false });
    }

    dispose(): void {
        this.subscriptions.forEach((d) => d.dispose());
        this.changes.dispose();
        this.answers.clear();
    }
}
