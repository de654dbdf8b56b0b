// "exportlens: Show Graph as a Picture": Model Explorer's page for the file's graph, in
// a webview beside the code. The server builds and serves the page (on 127.0.0.1, a
// token per session); a node selected in it comes back to the server, which asks VS
// Code to show the node's line (`window/showDocument`, see `revealBeside` in server.ts).
import { Uri, ViewColumn, WebviewPanel, env, window } from 'vscode';
import { pageCommandArgs, parsePageAnswer, pictureHtml } from './graphPicture';
import type { ServerController } from './server';

let panel: WebviewPanel | undefined;

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
        panel.onDidDispose(() => {
            panel = undefined;
        });
    } else {
        panel.title = answer.title;
        panel.reveal(ViewColumn.Beside, true);
    }
    panel.webview.html = pictureHtml(external.toString(true), answer.title);
}
