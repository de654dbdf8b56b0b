// The palette commands. Each works on the active Python file unless given a URI (as
// when bound in a menu), and reports failures as a message instead of throwing.
import { Disposable, ProgressLocation, Uri, commands, window } from 'vscode';
import { GraphDocuments, errorText } from './graphDocument';
import { showLog } from './log';
import type { ServerController } from './server';
import { parseStatus } from './statusText';

function targetFile(arg: unknown): Uri | undefined {
    if (arg instanceof Uri) {
        return arg;
    }
    const doc = window.activeTextEditor?.document;
    if (doc !== undefined && doc.languageId === 'python' && doc.uri.scheme === 'file') {
        return doc.uri;
    }
    void window.showInformationMessage('exportlens: open a Python model file first.');
    return undefined;
}

async function reexport(server: ServerController, arg: unknown): Promise<void> {
    const file = targetFile(arg);
    if (file === undefined) {
        return;
    }
    await window.withProgress(
        { location: ProgressLocation.Window, title: 'exportlens: exporting' },
        () => server.execute('exportlens.reexport', [file.toString()]),
    );
}

async function pickTarget(server: ServerController, file: Uri): Promise<string | null | undefined> {
    const status = parseStatus(await server.execute('exportlens.status', [file.toString()]));
    const names = status?.targets.map((t) => t.name) ?? [];
    if (names.length <= 1) {
        return null; // the server shows every target; one or none needs no question
    }
    const all = 'All targets';
    const picked = await window.showQuickPick([all, ...names], { placeHolder: 'Which target\u2019s graph?' });
    if (picked === undefined) {
        return undefined; // cancelled
    }
    return picked === all ? null : picked;
}

async function showGraph(server: ServerController, graphs: GraphDocuments, arg: unknown, target: unknown): Promise<void> {
    const file = targetFile(arg);
    if (file === undefined) {
        return;
    }
    const chosen = typeof target === 'string' ? target : await pickTarget(server, file);
    if (chosen !== undefined) {
        await graphs.open(file, chosen);
    }
}

async function clearCache(server: ServerController): Promise<void> {
    const removed = await server.execute('exportlens.clearCache', []);
    const count = typeof removed === 'number' ? removed : 0;
    void window.showInformationMessage(`exportlens: removed ${count} cached export result${count === 1 ? '' : 's'}.`);
}

/** Runs a command body; a failure becomes one error message naming the command. */
function guarded(title: string, body: (...args: unknown[]) => Promise<void>): (...args: unknown[]) => Promise<void> {
    return async (...args: unknown[]) => {
        try {
            await body(...args);
        } catch (error) {
            void window.showErrorMessage(`exportlens: ${title} failed: ${errorText(error)}`);
        }
    };
}

export function registerCommands(server: ServerController, graphs: GraphDocuments): Disposable[] {
    return [
        commands.registerCommand('exportlens.reexport', guarded('re-export', (uri) => reexport(server, uri))),
        commands.registerCommand(
            'exportlens.showGraph',
            guarded('show graph', (uri, target) => showGraph(server, graphs, uri, target)),
        ),
        commands.registerCommand('exportlens.clearCache', guarded('clear cache', () => clearCache(server))),
        commands.registerCommand('exportlens.restart', guarded('restart', () => server.restart('restart command'))),
        commands.registerCommand('exportlens.showOutput', () => showLog()),
    ];
}
