// The palette commands. Each works on the active Python file unless given a URI (as
// when bound in a menu), and reports failures as a message instead of throwing.
import { Disposable, ProgressLocation, Uri, commands, window } from 'vscode';
import { queryFromArgs, uriArgument } from './graphAnswer';
import { GraphDocuments, errorText } from './graphDocument';
import { showGraphPicture } from './graphPictureView';
import { GraphViews } from './graphView';
import { showLog } from './log';
import type { ServerController } from './server';
import { parseStatus } from './statusText';

/** The active editor's Python file, if it is one (no message). */
function activeFile(): Uri | undefined {
    const doc = window.activeTextEditor?.document;
    return doc !== undefined && doc.languageId === 'python' && doc.uri.scheme === 'file' ? doc.uri : undefined;
}

/**
 * The file a command works on: a Uri (menus), a URI string (the server's code lens sends
 * `[uri]`, which the lens need not be in the active editor), else the active file.
 */
function targetFile(arg: unknown): Uri | undefined {
    const given = uriArgument(arg);
    if (given !== undefined) {
        return Uri.parse(given);
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

/**
 * The graph view with source links: from the code lens (`[{uri, target}]`), positional
 * `[uri, target]`, or the palette (the active file; which target is asked when several).
 */
async function showNodes(server: ServerController, views: GraphViews, args: unknown[]): Promise<void> {
    const query = queryFromArgs(args, undefined);
    if (query !== undefined) {
        await views.open(query);
        return;
    }
    const file = targetFile(undefined);
    if (file === undefined) {
        return;
    }
    const chosen = await pickTarget(server, file);
    if (chosen !== undefined) {
        await views.open({ uri: file.toString(), target: chosen, line: null });
    }
}

/** The graph as a picture (Model Explorer) beside the code; which target is asked when several. */
async function showPicture(server: ServerController, arg: unknown): Promise<void> {
    const file = targetFile(arg);
    if (file === undefined) {
        return;
    }
    const chosen = await pickTarget(server, file);
    if (chosen !== undefined) {
        await showGraphPicture(server, file, chosen);
    }
}

/** "What did this line become": the nodes the cursor's line produced, in every target. */
async function showLineNodes(views: GraphViews): Promise<void> {
    const editor = window.activeTextEditor;
    const file = activeFile();
    if (editor === undefined || file === undefined) {
        void window.showInformationMessage('exportlens: put the cursor on a line of a Python model file first.');
        return;
    }
    await views.open({ uri: file.toString(), target: null, line: editor.selection.active.line });
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

export function registerCommands(server: ServerController, graphs: GraphDocuments, views: GraphViews): Disposable[] {
    return [
        commands.registerCommand('exportlens.reexport', guarded('re-export', (uri) => reexport(server, uri))),
        commands.registerCommand(
            'exportlens.showGraph',
            guarded('show graph', (uri, target) => showGraph(server, graphs, uri, target)),
        ),
        // Also the id of the server's command: a code lens's "Show graph" lands here and
        // opens the view instead of only asking the server (server.ts OWN_COMMANDS).
        commands.registerCommand('exportlens.graph', guarded('show graph nodes', (...args) => showNodes(server, views, args))),
        commands.registerCommand('exportlens.showGraphPicture', guarded('show graph as a picture', (uri) => showPicture(server, uri))),
        commands.registerCommand('exportlens.showLineNodes', guarded('show nodes of this line', () => showLineNodes(views))),
        commands.registerCommand('exportlens.clearCache', guarded('clear cache', () => clearCache(server))),
        commands.registerCommand('exportlens.restart', guarded('restart', () => server.restart('restart command'))),
        commands.registerCommand('exportlens.showOutput', () => showLog()),
    ];
}
