// Starting, stopping and restarting `python -P -m exportlens serve` behind a language
// client. Restarts are queued so two (settings change + command) never interleave.
import { Disposable, EventEmitter, LogOutputChannel, Range, Uri, ViewColumn, window, commands, workspace } from 'vscode';
import {
    DidChangeConfigurationNotification,
    ExecuteCommandRequest,
    LanguageClient,
    LanguageClientOptions,
    RevealOutputChannelOn,
    ServerOptions,
    CancellationToken,
    ResponseError,
    ShowDocumentParams,
    ShowDocumentRequest,
    ShowDocumentResult,
    State,
} from 'vscode-languageclient/node';
import { SECTION, firstFolder, homeDir, readInterpreterSetting, readServerSettings } from './config';
import { OWN_COMMANDS } from './commandIds';
import { checkImportable, fixMessage } from './importCheck';
import { chooseInterpreter, describeChoice, settingIsSet } from './interpreterChoice';
import { logError, logInfo, logWarn } from './log';
import { NotebookDiagnostics, serverPullsCells } from './notebookDiagnostics';
import { pythonExtensionInterpreter } from './python';
import { ServerSettings, didChangeConfigurationParams, initializationOptions } from './settings';

/**
 * The server's arguments. It runs in the workspace folder, which `python -m` would put
 * first on sys.path: `-P` (Python 3.11+) keeps it off, so a workspace `tokenize.py` or
 * `attr.py` cannot stand in for the library. The models' exports still import their
 * neighbours: the export job puts each model's own folder on sys.path.
 */
const SERVE_ARGS = ['-P', '-m', 'exportlens', 'serve'];


/** `window/showDocument` for a file: shown where it already is, else in the first column. */
async function revealBeside(
    params: ShowDocumentParams,
    next: ShowDocumentRequest.HandlerSignature,
): Promise<ShowDocumentResult> {
    const uri = Uri.parse(params.uri);
    if (params.external || uri.scheme !== 'file') {
        const result = await next(params, CancellationToken.None);
        return result instanceof ResponseError ? { success: false } : result;
    }
    const shown = window.visibleTextEditors.find((e) => e.document.uri.toString() === uri.toString());
    const selection = params.selection
        ? new Range(params.selection.start.line, params.selection.start.character, params.selection.end.line, params.selection.end.character)
        : undefined;
    try {
        await window.showTextDocument(uri, {
            viewColumn: shown?.viewColumn ?? ViewColumn.One,
            preserveFocus: params.takeFocus === false,
            selection,
        });
        return { success: true };
    } catch {
        return { success: false };
    }
}

export class ServerController implements Disposable {
    private client: LanguageClient | undefined;
    private notebookDiagnostics: NotebookDiagnostics | undefined;
    private queue: Promise<void> = Promise.resolve();
    private reportedProblems = new Set<string>();
    private readonly changed = new EventEmitter<void>();
    /** Fires when the server starts, stops or fails to start. */
    readonly onDidChange = this.changed.event;
    /** Why the server is not running, when it is not. */
    downReason: string | undefined = 'The server has not started yet.';

    constructor(private readonly channel: LogOutputChannel) {}

    get running(): LanguageClient | undefined {
        return this.client?.isRunning() ? this.client : undefined;
    }

    /** Stop the server if running, then start it with the current settings. */
    restart(reason: string): Promise<void> {
        this.queue = this.queue
            .then(() => this.doRestart(reason))
            .catch((error: unknown) => logError(`Restart failed: ${String(error)}`));
        return this.queue;
    }

    /** `workspace/executeCommand`; rejects with a readable message when the server is down. */
    async execute(command: string, args: unknown[]): Promise<unknown> {
        const client = this.running;
        if (client === undefined) {
            throw new Error(`the exportlens server is not running (${this.downReason ?? 'unknown reason'})`);
        }
        return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
    }

    /** A notification to the running server; nothing when it is not running. */
    notify(method: string, params: object): void {
        const client = this.running;
        if (client !== undefined) {
            void client.sendNotification(method, params).catch(() => undefined);
        }
    }

    async dispose(): Promise<void> {
        await this.stop();
        this.changed.dispose();
    }

    private setDown(reason: string | undefined): void {
        this.downReason = reason;
        this.changed.fire();
    }

    private async stop(): Promise<void> {
        this.notebookDiagnostics?.dispose();
        this.notebookDiagnostics = undefined;
        const client = this.client;
        this.client = undefined;
        if (client === undefined) {
            return;
        }
        try {
            if (client.needsStop()) {
                await client.stop(5000);
            }
        } catch (error) {
            logWarn(`Stopping the server: ${String(error)}`);
        }
        await client.dispose().catch(() => undefined);
    }

    private async doRestart(reason: string): Promise<void> {
        logInfo(`(Re)starting the server: ${reason}`);
        await this.stop();
        this.setDown('The server is starting.');

        const folder = firstFolder();
        const setting = readInterpreterSetting();
        const fromExtension = settingIsSet(setting) ? undefined : await pythonExtensionInterpreter(folder);
        const choice = chooseInterpreter({
            setting,
            pythonExtension: fromExtension,
            workspaceFolder: folder?.fsPath,
            home: homeDir(),
        });
        logInfo(`Interpreter: ${describeChoice(choice)}`);

        const check = await checkImportable(choice.command, folder?.fsPath);
        if (!check.ok) {
            const message = fixMessage(choice.command, check);
            logError(message);
            if (check.detail) {
                logError(`Details: ${check.detail}`);
            }
            this.setDown(message);
            void this.offerFix(message);
            return;
        }
        logInfo(`exportlens ${check.version} is importable there`);

        const client = this.createClient(choice.command, folder);
        this.client = client;
        client.onDidChangeState((event) => {
            if (this.client !== client) {
                return; // an old client stopping during a restart
            }
            if (event.newState === State.Running) {
                logInfo('Server running');
                this.setDown(undefined);
            } else if (event.newState === State.Stopped) {
                this.setDown('The server stopped; see the exportlens output.');
            }
        });
        logInfo(`Starting: ${choice.command} ${SERVE_ARGS.join(' ')} (cwd ${folder?.fsPath ?? process.cwd()})`);
        try {
            await client.start();
            if (this.client === client && serverPullsCells(client)) {
                this.notebookDiagnostics = new NotebookDiagnostics(client);
            }
        } catch (error) {
            const message = `exportlens: the server failed to start (${String(error)}). See the exportlens output.`;
            logError(message);
            this.setDown(message);
            void this.offerFix(message);
        }
    }

    private currentSettings(): ServerSettings {
        const { settings, problems } = readServerSettings();
        for (const problem of problems) {
            logWarn(problem);
            // Each distinct problem is shown once per session, not on every keystroke in settings.json.
            if (!this.reportedProblems.has(problem)) {
                this.reportedProblems.add(problem);
                void window.showWarningMessage(problem);
            }
        }
        return settings;
    }

    private createClient(python: string, folder: Uri | undefined): LanguageClient {
        const serverOptions: ServerOptions = {
            command: python,
            args: SERVE_ARGS,
            options: { cwd: folder?.fsPath, env: { ...process.env, PYTHONUNBUFFERED: '1' } },
        };
        const clientOptions: LanguageClientOptions = {
            // pyproject.toml too: the server shows the problems of its [tool.exportlens] there.
            // Python cells of Jupyter notebooks too: the client syncs them as notebooks
            // (notebookDocument/*, the server's notebookDocumentSync), and this entry gives
            // the cells' `vscode-notebook-cell:` URIs the hovers, hints, lenses and fixes.
            documentSelector: [
                { scheme: 'file', language: 'python' },
                { scheme: 'file', pattern: '**/pyproject.toml' },
                { notebook: { scheme: 'file', notebookType: 'jupyter-notebook' }, language: 'python' },
            ],
            outputChannel: this.channel,
            traceOutputChannel: this.channel,
            revealOutputChannelOn: RevealOutputChannelOn.Never,
            // A function: re-read on every start, including the client's own restart after a crash.
            // With VS Code's Workspace Trust: the server asks nothing more of a trusted workspace.
            initializationOptions: () => initializationOptions(this.currentSettings(), workspace.isTrusted),
            synchronize: { configurationSection: SECTION },
            middleware: {
                // A node selected in the graph's picture: its line in the editor column that
                // shows the file (else the first), not in the webview's column.
                window: { showDocument: (params, next) => revealBeside(params, next) },
                workspace: {
                    // The client would send the raw VS Code section (with `interpreter`,
                    // `trace` and unset defaults); send the mapped wire object instead.
                    didChangeConfiguration: async () => {
                        const params = didChangeConfigurationParams(this.currentSettings());
                        await this.client?.sendNotification(DidChangeConfigurationNotification.type, params);
                    },
                    // `workspace/configuration` pulls get the same object.
                    configuration: async (params, token, next) => {
                        const answers = await next(params, token);
                        if (!Array.isArray(answers)) {
                            return answers;
                        }
                        return params.items.map((item, i) =>
                            item.section === SECTION ? this.currentSettings() : answers[i],
                        );
                    },
                },
            },
        };
        const client = new LanguageClient('exportlens', 'exportlens', serverOptions, clientOptions);
        skipOwnCommands(client);
        return client;
    }

    private async offerFix(message: string): Promise<void> {
        const choice = await window.showErrorMessage(message, 'Open Settings', 'Show Output');
        if (choice === 'Open Settings') {
            await commands.executeCommand('workbench.action.openSettings', 'exportlens.interpreter');
        } else if (choice === 'Show Output') {
            this.channel.show(true);
        }
    }
}

function skipOwnCommands(client: LanguageClient): void {
    const feature = client.getFeature(ExecuteCommandRequest.method);
    const register = feature.register.bind(feature);
    feature.register = (data) => {
        const commandIds = data.registerOptions.commands.filter((id) => !OWN_COMMANDS.has(id));
        register({ ...data, registerOptions: { ...data.registerOptions, commands: commandIds } });
    };
}
