// The diagnostics of notebook cells, pulled by the extension itself.
//
// The server answers `textDocument/diagnostic` on a cell's URI, and a client that pulls
// gets no pushed diagnostics. But vscode-languageclient 9 pulls only for documents shown
// in text tabs, never for a notebook's cells (microsoft/vscode-languageserver-node#1464,
// fixed in 10.0.0-next): without this, a notebook would show no problems at all. So each
// Python cell of an open Jupyter notebook is pulled here when the notebook opens, changes
// or is saved, and again on the server's `workspace/diagnostic/refresh`; the answers go
// into a collection of their own. With language client 10 this module goes away.
import { Diagnostic, Disposable, EventEmitter, NotebookCellKind, NotebookDocument, Uri, languages, workspace } from 'vscode';
import {
    DiagnosticRefreshRequest,
    DocumentDiagnosticReportKind,
    DocumentDiagnosticRequest,
    LanguageClient,
} from 'vscode-languageclient/node';
import { logWarn } from './log';

/** The notebooks the server syncs (its `notebookSelector`) and whose cells it answers. */
const NOTEBOOK_TYPE = 'jupyter-notebook';
const PULL_DELAY_MS = 300;

function isSyncedNotebook(notebook: NotebookDocument): boolean {
    return notebook.notebookType === NOTEBOOK_TYPE && notebook.uri.scheme === 'file';
}

/** The cells whose diagnostics are pulled: the Python code cells. */
function pulledCells(notebook: NotebookDocument) {
    return notebook.getCells().filter((c) => c.kind === NotebookCellKind.Code && c.document.languageId === 'python');
}

type ProviderShape = { onDidChangeDiagnosticsEmitter?: EventEmitter<void> };

/** Whether the server both syncs notebooks and answers pulls (else it pushes, or has no notebooks). */
export function serverPullsCells(client: LanguageClient): boolean {
    const capabilities = client.initializeResult?.capabilities;
    return capabilities?.notebookDocumentSync !== undefined && capabilities.diagnosticProvider !== undefined;
}

export class NotebookDiagnostics implements Disposable {
    private readonly collection = languages.createDiagnosticCollection('exportlens-notebooks');
    private readonly disposables: Disposable[] = [];
    private readonly timers = new Map<string, NodeJS.Timeout>();
    /** Per notebook: the number of its latest pull; an older pull's answers are dropped. */
    private readonly generations = new Map<string, number>();
    /** Per notebook: the cell URIs last given diagnostics, to clear the cells that went. */
    private readonly shown = new Map<string, Uri[]>();

    constructor(private readonly client: LanguageClient) {
        this.disposables.push(
            this.collection,
            workspace.onDidOpenNotebookDocument((nb) => this.schedule(nb)),
            workspace.onDidChangeNotebookDocument((event) => this.schedule(event.notebook)),
            workspace.onDidSaveNotebookDocument((nb) => this.schedule(nb)),
            workspace.onDidCloseNotebookDocument((nb) => this.forget(nb)),
            // The server's refresh (an export finished): the library's own handler, which
            // re-pulls the text documents, then the cells' pulls.
            client.onRequest(DiagnosticRefreshRequest.type, () => {
                this.refreshTextDocuments();
                for (const nb of workspace.notebookDocuments) {
                    this.schedule(nb);
                }
            }),
        );
        for (const nb of workspace.notebookDocuments) {
            this.schedule(nb);
        }
    }

    dispose(): void {
        for (const timer of this.timers.values()) {
            clearTimeout(timer);
        }
        this.timers.clear();
        this.generations.clear();
        for (const d of this.disposables) {
            d.dispose();
        }
    }

    /** What vscode-languageclient's refresh handler does (this one replaces it). */
    private refreshTextDocuments(): void {
        const feature = this.client.getFeature(DocumentDiagnosticRequest.method) as unknown as {
            getAllProviders?: () => Iterable<ProviderShape>;
        };
        if (typeof feature?.getAllProviders !== 'function') {
            return;
        }
        for (const provider of feature.getAllProviders()) {
            provider.onDidChangeDiagnosticsEmitter?.fire();
        }
    }

    private schedule(notebook: NotebookDocument): void {
        if (!isSyncedNotebook(notebook)) {
            return;
        }
        const key = notebook.uri.toString();
        clearTimeout(this.timers.get(key));
        this.timers.set(
            key,
            setTimeout(() => {
                this.timers.delete(key);
                void this.pull(notebook);
            }, PULL_DELAY_MS),
        );
    }

    private forget(notebook: NotebookDocument): void {
        const key = notebook.uri.toString();
        clearTimeout(this.timers.get(key));
        this.timers.delete(key);
        this.generations.set(key, (this.generations.get(key) ?? 0) + 1);
        for (const uri of this.shown.get(key) ?? []) {
            this.collection.delete(uri);
        }
        this.shown.delete(key);
    }

    private async pull(notebook: NotebookDocument): Promise<void> {
        const key = notebook.uri.toString();
        const generation = (this.generations.get(key) ?? 0) + 1;
        this.generations.set(key, generation);
        const cells = pulledCells(notebook);
        const answers = await Promise.all(
            cells.map(async (cell): Promise<Diagnostic[] | undefined> => {
                const uri = cell.document.uri;
                try {
                    const report = await this.client.sendRequest(DocumentDiagnosticRequest.type, {
                        textDocument: { uri: this.client.code2ProtocolConverter.asUri(uri) },
                    });
                    if (report.kind !== DocumentDiagnosticReportKind.Full) {
                        return undefined; // unchanged: what is shown stays
                    }
                    return await this.client.protocol2CodeConverter.asDiagnostics(report.items);
                } catch (error) {
                    logWarn(`Diagnostics of a notebook cell (${uri.toString()}): ${String(error)}`);
                    return undefined;
                }
            }),
        );
        if (this.generations.get(key) !== generation) {
            return; // a newer pull (or the close) came while this one waited
        }
        for (const [i, diagnostics] of answers.entries()) {
            if (diagnostics !== undefined) {
                this.collection.set(cells[i].document.uri, diagnostics);
            }
        }
        // Cells deleted since the last pull: their diagnostics go with them.
        const current = new Set(cells.map((c) => c.document.uri.toString()));
        for (const uri of this.shown.get(key) ?? []) {
            if (!current.has(uri.toString())) {
                this.collection.delete(uri);
            }
        }
        this.shown.set(key, cells.map((c) => c.document.uri));
    }
}
