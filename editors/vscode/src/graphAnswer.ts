// What the server's `exportlens.graph` command answers, checked, and what the graph
// view's links and arguments are made of. Pure: no `vscode` import, so it is unit-tested
// with plain Node; graphView.ts turns these into VS Code links and locations.

/** An LSP position/range (0-based lines, UTF-16 columns). */
export interface LspRange {
    start: { line: number; character: number };
    end: { line: number; character: number };
}

/** One row's link: columns [start, end) of row `line` in `text` jump to `uri` at `range`. */
export interface GraphLink {
    line: number;
    start: number;
    end: number;
    uri: string;
    range: LspRange;
}

export interface GraphAnswer {
    title: string;
    text: string;
    links: GraphLink[];
}

/** Which graph a view shows: a file's (one target or all), or what one of its lines became. */
export interface GraphQuery {
    uri: string; // the source file's URI as the server knows it
    target: string | null; // null: every target
    line: number | null; // 0-based document line; null: the whole graph
}

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

function isPosition(v: unknown): v is { line: number; character: number } {
    const p = v as { line?: unknown; character?: unknown } | null;
    return typeof p === 'object' && p !== null && isInt(p.line) && isInt(p.character);
}

function isRange(v: unknown): v is LspRange {
    const r = v as { start?: unknown; end?: unknown } | null;
    return typeof r === 'object' && r !== null && isPosition(r.start) && isPosition(r.end);
}

function isLink(v: unknown): v is GraphLink {
    const l = v as Partial<GraphLink> | null;
    return (
        typeof l === 'object' &&
        l !== null &&
        isInt(l.line) &&
        isInt(l.start) &&
        isInt(l.end) &&
        l.end > l.start &&
        typeof l.uri === 'string' &&
        isRange(l.range)
    );
}

/**
 * The answer, or a message saying what is wrong with it. A malformed link is dropped
 * (the row still shows; only its jump is lost) rather than failing the whole view.
 */
export function parseGraphAnswer(value: unknown): GraphAnswer | string {
    const a = value as { title?: unknown; text?: unknown; links?: unknown } | null;
    if (typeof a !== 'object' || a === null || typeof a.text !== 'string') {
        return `unexpected answer from exportlens.graph: ${JSON.stringify(value)}`;
    }
    const links = Array.isArray(a.links) ? a.links.filter(isLink) : [];
    return { title: typeof a.title === 'string' ? a.title : '', text: a.text, links };
}

/** The link under a position of the graph text, if any (F12 / Go to Definition there). */
export function linkAt(links: readonly GraphLink[], line: number, character: number): GraphLink | undefined {
    return links.find((l) => l.line === line && l.start <= character && character < l.end);
}

/** The `workspace/executeCommand` arguments for a query (the interface's object form). */
export function graphCommandArgs(query: GraphQuery): [Record<string, unknown>] {
    const arg: Record<string, unknown> = { uri: query.uri };
    if (query.target !== null) {
        arg.target = query.target;
    }
    if (query.line !== null) {
        arg.line = query.line;
    }
    return [arg];
}

/**
 * A query from a command's arguments: the lens's `[{uri, target}]`, the positional
 * `[uri, target]`, a URI string or Uri (a menu), or nothing (then `fallback`, the active file).
 * `undefined` when there is no file to show.
 */
export function queryFromArgs(args: readonly unknown[], fallback: string | undefined): GraphQuery | undefined {
    const [first, second] = args;
    if (typeof first === 'object' && first !== null && typeof (first as { uri?: unknown }).uri === 'string') {
        const o = first as { uri: string; target?: unknown; line?: unknown };
        return {
            uri: o.uri,
            target: typeof o.target === 'string' ? o.target : null,
            line: isInt(o.line) ? o.line : null,
        };
    }
    const uri = uriArgument(first) ?? fallback;
    if (uri === undefined) {
        return undefined;
    }
    return { uri, target: typeof second === 'string' ? second : null, line: null };
}

/** The URI string a lens or menu passed (`[uri]` from the server, a VS Code Uri from a menu). */
export function uriArgument(arg: unknown): string | undefined {
    if (typeof arg === 'string' && arg.length > 0) {
        return arg;
    }
    // A vscode.Uri without importing vscode: it has a scheme and a toString of its own.
    const u = arg as { scheme?: unknown; toString?: () => string } | null;
    if (typeof u === 'object' && u !== null && typeof u.scheme === 'string' && typeof u.toString === 'function') {
        return u.toString();
    }
    return undefined;
}

/** The query carried in a graph view's URI (its `query` part), or undefined if not one of ours. */
export function parseViewQuery(text: string): GraphQuery | undefined {
    try {
        const q = JSON.parse(text) as Partial<GraphQuery>;
        if (typeof q.uri === 'string') {
            return {
                uri: q.uri,
                target: typeof q.target === 'string' ? q.target : null,
                line: isInt(q.line) ? q.line : null,
            };
        }
    } catch {
        // a hand-made URI
    }
    return undefined;
}

/** The tab's name: `counter.py (all targets).nodes`, `counter.py:14.nodes` for a line's nodes. */
export function viewName(sourcePath: string, query: GraphQuery): string {
    if (query.line !== null) {
        const of = query.target === null ? '' : ` (${query.target})`;
        return `${sourcePath}:${query.line + 1}${of}.nodes`;
    }
    return `${sourcePath} (${query.target ?? 'all targets'}).nodes`;
}
