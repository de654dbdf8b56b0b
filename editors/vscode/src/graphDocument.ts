// "Show Exported Graph": the graph torch exported for a file, as a read-only virtual
// document (scheme `exportlens-graph`). Its text comes from the server's
// `exportlens.showGraph` command each time VS Code asks, and it is refreshed when the
// source file's diagnostics change (a new export result arrived).
import {
    Disposable,
    EventEmitter,
    TextDocumentContentProvider,
    Uri,
    languages,
    window,
    workspace,
} from 'vscode';
import type { ServerController } from './server';

export const GRAPH_SCHEME = 'exportlens-graph';

interface GraphQuery {
    source: string; // the model file's URI
    target: string | null; // one target, or null for all of the file's targets
}

/** `exportlens-graph:/models/counter.py (Counter).graph?{"source":...,"target":...}` */
export function graphUri(source: Uri, target: string | null): Uri {
    const label = target === null ? 'all targets' : target;
    const query: GraphQuery = { source: source.toString(), target };
    return Uri.from({
        scheme: GRAPH_SCHEME,
        path: `${source.path} (${label}).graph`,
        query: JSON.stringify(query),
    });
}

function parseQuery(uri: Uri): GraphQuery | undefined {
    try {
        const query = JSON.parse(uri.query) as Partial<GraphQuery>;
        if (typeof query.source === 'string') {
            return { source: query.source, target: typeof query.target === 'string' ? query.target : null };
        }
    } catch {
        // fall through: a hand-made URI
    }
    return undefined;
}

export class GraphDocuments implements TextDocumentContentProvider, Disposable {
    private readonly changes = new EventEmitter<Uri>();
    readonly onDidChange = this.changes.event;
    private readonly subscriptions: Disposable[] = [];

    constructor(private readonly server: ServerController) {
        this.subscriptions.push(
            workspace.registerTextDocumentContentProvider(GRAPH_SCHEME, this),
            languages.onDidChangeDiagnostics((event) => {
                const changed = new Set(event.uris.map((u) => u.toString()));
                this.refresh((source) => changed.has(source));
            }),
        );
    }

    /** Ask VS Code to re-read the open graph documents whose source matches. */
    refresh(matches: (source: string) => boolean): void {
        for (const doc of workspace.textDocuments) {
            if (doc.uri.scheme !== GRAPH_SCHEME) {
                continue;
            }
            const query = parseQuery(doc.uri);
            if (query !== undefined && matches(query.source)) {
                this.changes.fire(doc.uri);
            }
        }
    }

    async provideTextDocumentContent(uri: Uri): Promise<string> {
        const query = parseQuery(uri);
        if (query === undefined) {
            return `# exportlens: not a graph document: ${uri.toString()}\n`;
        }
        const args = query.target === null ? [query.source] : [query.source, query.target];
        try {
            const text = await this.server.execute('exportlens.showGraph', args);
            return typeof text === 'string' ? text : `# exportlens: unexpected answer: ${JSON.stringify(text)}\n`;
        } catch (error) {
            // Shown in the document itself, so a reopened tab says why it is empty.
            return `# exportlens: no graph for ${query.source}\n# ${errorText(error)}\n`;
        }
    }

    async open(source: Uri, target: string | null): Promise<void> {
        const doc = await workspace.openTextDocument(graphUri(source, target));
        await window.showTextDocument(doc, { preview: true, preserveFocus: false });
    }

    dispose(): void {
        this.subscriptions.forEach((d) => d.dispose());
        this.changes.dispose();
    }
}

export function errorText(error: unknown): string {
    if (error instanceof Error) {
        return error.message;
    }
    return String(error);
}
