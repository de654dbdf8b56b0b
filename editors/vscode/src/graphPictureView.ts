// "exportlens: Show Graph as a Picture": Model Explorer's page for the file's graph, in
// a webview beside the code. The server builds and serves the page (on 127.0.0.1, a
// token per session); a node selected in it comes back to the server, which asks VS
// Code to show the node's line (`window/showDocument`, see `revealBeside` in server.ts).
// While the picture is open, the cursor's line goes to the server (`exportlens/cursor`),
// which has the page select the nodes that line made; a new result redraws the page
// (the server tells it), keeping its expanded layers and selection.
import { Disposable, Uri, ViewColumn, WebviewPanel, env, window } from 'vscode';
import { cursorParams, pageCommandArgs, parsePageAnswer, pictureHtml } from './graphPicture';
import type { ServerController } from './server';

let panel: WebviewPanel | undefined;

/** Sends the cursor's line, once it rests for CURSOR_MS, while the panel lives. */
const CURSOR_MS = 150;

function followCursor(server: ServerController): Disposable {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const listener = window.onDidChangeTextEditorSelection((event) => {
        const doc = event.textEditor.document;
        const params = cursorParams(doc.uri.toString(), doc.uri.scheme, doc.languageId, event.selections[0]?.active.line ?? -1);
        if (params === undefined) {
            return;
        }
        if (timer !== undefined) {
            clearTimeout(timer);
        }
        timer = setTimeout(() => {
            timer = undefined;
            server.notify('exportlens/cursor', params);
        }, CURSOR_MS);
    });
    return new Disposable(() => {
        if (timer !== undefined) {
            clearTimeout(timer);
        }
        listener.dispose();
    });
}

export async function showGraphPicture(server: ServerController, file: Uri, target: string | null): Promise<void> {
    const answer = parsePageAnswer(await server.execute('exportlens.graph', pageCommandArgs(file.toString(), target)));
    if (answer === undefined) {
        throw new Error('the server returned no page address');
    }
    // code-server and remote windows reach the server's port through their own address.
    const external = await env.asExternalUri(Uri.parse(answer.url));
    if (panel === undefined) {
        panel = window.createWebviewPanel(
            'exportlens.graphPicture',
            answer.title,
            { viewColumn: ViewColumn.Beside, preserveFocus: true },
            // The framed page's scripts need it (a frame inherits the webview's sandbox);
            // the webview's own document runs none (its CSP has no script-src).
            { enableScripts: true, retainContextWhenHidden: true },
        );
        const following = followCursor(server);
        panel.onDidDispose(() => {
            following.dispose();
            panel = undefined;
        });
    } else {
        panel.title = answer.title;
        panel.reveal(ViewColumn.Beside, true);
    }
    panel.webview.html = pictureHtml(external.toString(true), answer.title);
}
