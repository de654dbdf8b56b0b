// The status bar item: the export state of the active Python file. It asks the server
// (`exportlens.status`) only when something could have changed it: another editor
// became active, that file's diagnostics changed, or the server (re)started. Requests
// are coalesced (one in flight, at most one queued), and while a file is exporting
// the answer is polled again once a second until it settles.
import { Disposable, StatusBarAlignment, StatusBarItem, TextEditor, ThemeColor, languages, window } from 'vscode';
import type { ServerController } from './server';
import { StatusView, describeServerDown, describeStatus, parseStatus } from './statusText';

const COALESCE_MS = 100;
const EXPORTING_POLL_MS = 1000;

export class ExportStatusBar implements Disposable {
    private readonly item: StatusBarItem;
    private readonly subscriptions: Disposable[] = [];
    private timer: NodeJS.Timeout | undefined;
    private inFlight = false;
    private again = false;

    constructor(private readonly server: ServerController) {
        this.item = window.createStatusBarItem('exportlens.status', StatusBarAlignment.Left, 0);
        this.item.name = 'exportlens';
        this.subscriptions.push(
            this.item,
            window.onDidChangeActiveTextEditor(() => this.schedule()),
            languages.onDidChangeDiagnostics((event) => {
                const active = window.activeTextEditor?.document.uri.toString();
                if (active !== undefined && event.uris.some((u) => u.toString() === active)) {
                    this.schedule();
                }
            }),
            server.onDidChange(() => this.schedule()),
        );
        this.schedule();
    }

    /** Refresh soon; bursts of events become one request. */
    schedule(delay = COALESCE_MS): void {
        if (this.timer !== undefined) {
            clearTimeout(this.timer);
        }
        this.timer = setTimeout(() => {
            this.timer = undefined;
            void this.refresh();
        }, delay);
    }

    private async refresh(): Promise<void> {
        if (this.inFlight) {
            this.again = true;
            return;
        }
        this.inFlight = true;
        try {
            await this.update(window.activeTextEditor);
        } finally {
            this.inFlight = false;
            if (this.again) {
                this.again = false;
                this.schedule();
            }
        }
    }

    private async update(editor: TextEditor | undefined): Promise<void> {
        if (editor === undefined || editor.document.languageId !== 'python' || editor.document.uri.scheme !== 'file') {
            this.item.hide();
            return;
        }
        if (this.server.running === undefined) {
            this.show(describeServerDown(this.server.downReason ?? 'The exportlens server is not running.'));
            return;
        }
        let raw: unknown;
        try {
            raw = await this.server.execute('exportlens.status', [editor.document.uri.toString()]);
        } catch {
            // The server may be restarting; its onDidChange will schedule the next look.
            this.item.hide();
            return;
        }
        if (window.activeTextEditor !== editor) {
            return; // the user moved on while we asked; that change scheduled a refresh
        }
        const status = parseStatus(raw);
        if (status === undefined) {
            this.item.hide();
            return;
        }
        this.show(describeStatus(status));
        if (status.state === 'exporting') {
            this.schedule(EXPORTING_POLL_MS);
        }
    }

    private show(view: StatusView): void {
        this.item.text = view.text;
        this.item.tooltip = view.tooltip;
        this.item.command = view.command;
        this.item.backgroundColor =
            view.tone === 'error'
                ? new ThemeColor('statusBarItem.errorBackground')
                : view.tone === 'warning'
                  ? new ThemeColor('statusBarItem.warningBackground')
                  : undefined;
        this.item.show();
    }

    dispose(): void {
        if (this.timer !== undefined) {
            clearTimeout(this.timer);
        }
        this.subscriptions.forEach((d) => d.dispose());
    }
}
