// Before starting the server: can the chosen interpreter import exportlens at all?
// Without this, a missing package shows up as a language client that crashes five
// times and gives up with a stack trace; with it, the user gets the fix in one line.
// Node only (no `vscode`), so it is tested against real interpreters.
import { execFile } from 'child_process';

export type ImportCheck =
    | { ok: true; version: string }
    | { ok: false; reason: 'not-found' | 'not-importable' | 'failed'; detail: string };

// `import exportlens` never imports torch (docs/contract.md, "Python API"), so this stays well under a second;
// the limit only guards against an interpreter that hangs.
const CHECK_TIMEOUT_MS = 30_000;

const PROBE = 'import exportlens; print(getattr(exportlens, "__version__", "unknown"))';
// -P as for the server: the check runs in the workspace folder, whose `tokenize.py` or
// `attr.py` must not stand in for the library (`-c` would put that folder on sys.path).
const PROBE_ARGS = ['-P', '-c', PROBE];

export function checkImportable(python: string, cwd: string | undefined, timeoutMs = CHECK_TIMEOUT_MS): Promise<ImportCheck> {
    return new Promise((resolve) => {
        execFile(
            python,
            PROBE_ARGS,
            { cwd, timeout: timeoutMs, encoding: 'utf8', windowsHide: true },
            (error, stdout, stderr) => {
                if (!error) {
                    resolve({ ok: true, version: stdout.trim() });
                    return;
                }
                const code = (error as NodeJS.ErrnoException).code;
                if (code === 'ENOENT' || code === 'EACCES') {
                    resolve({ ok: false, reason: 'not-found', detail: `${python}: ${code === 'ENOENT' ? 'no such file' : 'not executable'}` });
                } else if (/^unknown option:? -P\b/im.test(stderr)) {
                    // Python before 3.11, which exportlens does not support anyway.
                    resolve({ ok: false, reason: 'failed', detail: `${python} is older than Python 3.11 (it has no -P option)` });
                } else if (/ModuleNotFoundError|No module named/.test(stderr)) {
                    resolve({ ok: false, reason: 'not-importable', detail: lastLine(stderr) });
                } else {
                    const why = error.killed ? `did not answer within ${timeoutMs / 1000} s` : lastLine(stderr) || error.message;
                    resolve({ ok: false, reason: 'failed', detail: why });
                }
            },
        );
    });
}

function lastLine(text: string): string {
    const lines = text.trim().split(/\r?\n/);
    return lines[lines.length - 1] ?? '';
}

/** The one-line error shown to the user, with the fix. */
export function fixMessage(python: string, check: Exclude<ImportCheck, { ok: true }>): string {
    switch (check.reason) {
        case 'not-found':
            return `exportlens: the Python interpreter "${python}" was not found. Set "exportlens.interpreter" to a Python that has exportlens and torch installed.`;
        case 'not-importable':
            return `exportlens is not installed in "${python}". Install it there (\`${python} -m pip install exportlens\`) or set "exportlens.interpreter" to a Python that has it.`;
        case 'failed':
            return `exportlens: "${python} -c 'import exportlens'" failed (${check.detail}). Fix that environment, or set "exportlens.interpreter" to another Python.`;
    }
}
