// The graph as a picture: what the server's `exportlens.graph` answers with `page: true`
// (the address of Model Explorer's page, served by the server on 127.0.0.1), checked,
// and the webview's HTML that frames it. Pure (no `vscode` import): unit-tested.

export interface PageAnswer {
    title: string;
    url: string;
}

/** The server's `{title, url}`, or undefined for anything else (a `url` not on loopback included). */
export function parsePageAnswer(value: unknown): PageAnswer | undefined {
    if (typeof value !== 'object' || value === null) {
        return undefined;
    }
    const { title, url } = value as Record<string, unknown>;
    if (typeof title !== 'string' || typeof url !== 'string' || !/^http:\/\/127\.0\.0\.1:\d+\/[\w-]+\/\d+\/$/.test(url)) {
        return undefined;
    }
    return { title, url };
}

/** The `exportlens.graph` arguments that ask for the page of `uri` (and `target`). */
export function pageCommandArgs(uri: string, target: string | null): unknown[] {
    return [target === null ? { uri, page: true } : { uri, target, page: true }];
}

function escapeAttribute(text: string): string {
    return text.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * The webview's page: the graph's page in a frame filling it. `frameUrl` is the address
 * as the webview reaches it (`env.asExternalUri` of the server's: code-server proxies
 * it); only that origin may be framed, and the webview runs no script of its own.
 */
export function pictureHtml(frameUrl: string, title: string): string {
    const origin = new URL(frameUrl).origin;
    const csp = `default-src 'none'; frame-src ${origin}; style-src 'unsafe-inline'`;
    return [
        '<!DOCTYPE html>',
        '<html lang="en"><head><meta charset="utf-8">',
        `<meta http-equiv="Content-Security-Policy" content="${escapeAttribute(csp)}">`,
        `<title>${escapeAttribute(title)}</title>`,
        '<style>html, body, iframe { margin: 0; padding: 0; border: 0; width: 100%; height: 100%; overflow: hidden; }</style>',
        '</head><body>',
        `<iframe src="${escapeAttribute(frameUrl)}" title="${escapeAttribute(title)}"></iframe>`,
        '</body></html>',
    ].join('\n');
}

export interface CursorParams {
    uri: string;
    line: number;
}

/**
 * The `exportlens/cursor` notification's params for a cursor on 0-based `line` of a
 * document, or undefined for a document the server has no nodes of (not a Python file
 * on disk).
 */
export function cursorParams(uri: string, scheme: string, languageId: string, line: number): CursorParams | undefined {
    if (scheme !== 'file' || languageId !== 'python' || !Number.isInteger(line) || line < 0) {
        return undefined;
    }
    return { uri, line };
}
