// Activation only: wire the modules together. Nothing here decides anything.
import { ExtensionContext, workspace } from 'vscode';
import { registerCommands } from './commands';
import { GraphDocuments } from './graphDocument';
import { GraphViews } from './graphView';
import { createLogChannel, logInfo } from './log';
import { onPythonInterpreterChange } from './python';
import { readInterpreterSetting } from './config';
import { settingIsSet } from './interpreterChoice';
import { ServerController } from './server';
import { needsRestart } from './settings';
import { ExportStatusBar } from './statusBar';

let server: ServerController | undefined;

export async function activate(context: ExtensionContext): Promise<void> {
    const channel = createLogChannel();
    logInfo(`exportlens extension ${context.extension.packageJSON.version as string} activated`);
    server = new ServerController(channel);
    const graphs = new GraphDocuments(server);
    const views = new GraphViews(server);
    context.subscriptions.push(
        channel,
        graphs,
        views,
        new ExportStatusBar(server),
        ...registerCommands(server, graphs, views),
        workspace.onDidChangeConfiguration((event) => {
            if (needsRestart((section) => event.affectsConfiguration(section))) {
                void server?.restart('settings changed');
            }
        }),
    );
    void server.restart('activation');
    // Subscribed after the start, so activating the Python extension never delays ours.
    const pythonListener = await onPythonInterpreterChange(() => {
        // Only matters while the Python extension is where the interpreter comes from.
        if (!settingIsSet(readInterpreterSetting())) {
            void server?.restart('the Python extension selected another interpreter');
        }
    });
    if (pythonListener !== undefined) {
        context.subscriptions.push(pythonListener);
    }
}

export async function deactivate(): Promise<void> {
    await server?.dispose();
    server = undefined;
}
