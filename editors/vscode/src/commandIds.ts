// The command ids this extension registers itself. Pure (no `vscode` import) so a unit
// test checks it against package.json.

/**
 * Commands this extension registers itself (package.json). The server advertises some of
 * the same ids in `executeCommandProvider`; the language client would register those as
 * VS Code commands too and fail on the duplicate, so it skips these. `exportlens.reexport`
 * and `exportlens.graph` are also what the server's code lenses run: registered here,
 * a click re-exports with progress, or opens the graph view (the client's forwarding
 * would only fetch the answer and show nothing).
 */
export const OWN_COMMANDS: ReadonlySet<string> = new Set([
    'exportlens.reexport',
    'exportlens.graph',
    'exportlens.showLineNodes',
    'exportlens.showGraphPicture',
    'exportlens.showGraph',
    'exportlens.clearCache',
    'exportlens.restart',
    'exportlens.showOutput',
]);
