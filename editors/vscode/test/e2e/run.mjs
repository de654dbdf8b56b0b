// Real-editor test: install the built .vsix into code-server, open model files in a
// headless Chromium and read what a person would see: the exportlens output channel,
// the Problems panel and the hover over a `forward` argument.
//
// Input: one JSON object in the EXPORTLENS_E2E environment variable (see `Config`).
// Output: one JSON line on stdout, `{"ok": bool, "steps": [...], "problems": [...],
// "hover": "...", "graph": "...", "statusBar": {...}, "output": "...", "screenshots": [...],
// "error": "..."}`; progress on stderr.
// Exit status 0 when every check passed.
//
// Config: {
//   node, codeServer, playwrightCore, chromium,  // from setup-code-server.sh
//   vsix, python, workspaceFiles: [paths], artifacts: dir,
//   mode: "plumbing" | "full" | "not-installed" | "features" | "picture" | "notebook",  // plumbing: only the server
//                                                // start attempt; not-installed: `python` lacks exportlens;
//                                                // features: hints, lenses, graph view, quick fix;
//                                                // picture: Show Graph as a Picture (Model Explorer's webview)
//   features: {target, module, view, lineNodes, quickFix},  // see features() below
//   picture: {file, lenses, node: {label, file, line}, cursor: {line, node}, edit: {append, label}},  // see picture()
//   notebook: {file, problems: [{cell, line, code, severity}], hover: {cell, code, argument, expect}},
//                                                // notebook: an .ipynb in the notebook editor, see notebook();
//                                                // result.notebook: {jumps, hover, cells}
//   expectProblems: [{file, code, line}],        // full: must all show in the Problems panel
//   hover: {file, line, column, expect},         // full: hover there must contain `expect`
//   statusBar: {file: text},                     // full: the status item's text on each file
//   graph: {file, expect: [strings]},            // full: "Show Exported Graph" on file shows these
//   settingsChange: {settings, gone: {code}, kept: [{code, line}]},  // full: edit settings.json
//   timeoutMs
// }
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

const config = JSON.parse(process.env.EXPORTLENS_E2E ?? '{}');
const result = {
    ok: false, steps: [], problems: [], hover: '', graph: '', statusBar: {}, notification: '', problemsAfterChange: [],
    hints: {}, hintsOff: '', lenses: {}, lensCommands: [], jumps: [], lineNodes: '', quickFixes: [], problemsAfterFix: [],
    output: '', screenshots: [], picture: {}, notebook: {}, ui: null, error: null,
};
const log = (msg) => process.stderr.write(`e2e: ${msg}\n`);
const started = Date.now();
const step = (name) => {
    const stamped = `${((Date.now() - started) / 1000).toFixed(1)}s ${name}`;
    result.steps.push(stamped);
    log(stamped);
};
const TIMEOUT = config.timeoutMs ?? 240_000; // exports: the first one starts a torch worker
// Upper bound for a workbench element to appear; generous because CI shares 2 cores.
const UI_WAIT = 90_000;

function freePort() {
    return new Promise((resolve, reject) => {
        const server = net.createServer();
        server.unref();
        server.on('error', reject);
        server.listen(0, '127.0.0.1', () => {
            const { port } = server.address();
            server.close(() => resolve(port));
        });
    });
}

async function waitForHttp(url, child, deadlineMs) {
    const end = Date.now() + deadlineMs;
    while (Date.now() < end) {
        if (child.exitCode !== null) {
            throw new Error(`code-server exited with ${child.exitCode} before it answered`);
        }
        try {
            const res = await fetch(url);
            if (res.ok) {
                return;
            }
        } catch {
            // not listening yet
        }
        await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error(`code-server did not answer at ${url} within ${deadlineMs} ms`);
}

/** A fresh profile: workspace trust off (so the extension runs), no welcome page, no update checks. */
function makeProfile(root) {
    const userDataDir = path.join(root, 'user-data');
    const extensionsDir = path.join(root, 'extensions');
    const workspace = path.join(root, 'workspace');
    const cacheDir = path.join(root, 'exportlens-cache');
    for (const dir of [path.join(userDataDir, 'User'), extensionsDir, workspace, cacheDir]) {
        fs.mkdirSync(dir, { recursive: true });
    }
    const settings = {
        'security.workspace.trust.enabled': false,
        'workbench.startupEditor': 'none',
        'workbench.tips.enabled': false,
        'workbench.enableExperiments': false,
        'extensions.autoUpdate': false,
        'extensions.autoCheckUpdates': false,
        'extensions.ignoreRecommendations': true,
        'update.mode': 'none',
        'telemetry.telemetryLevel': 'off',
        'chat.disableAIFeatures': true,
        'editor.hover.delay': 100,
        'workbench.secondarySideBar.defaultVisibility': 'hidden',
        // Each opened model stays open (a preview tab would be replaced, closing its document).
        'workbench.editor.enablePreview': false,
        // The test types settings.json: no auto-closed brackets or quotes, no re-indent.
        'editor.autoClosingBrackets': 'never',
        'editor.autoClosingQuotes': 'never',
        'editor.autoIndent': 'none',
        'editor.formatOnType': false,
        'exportlens.interpreter': config.python,
        'exportlens.cacheDir': cacheDir,
        // verbose: the log then holds each message's params, so the test can read exactly
        // what initializationOptions and didChangeConfiguration carried.
        'exportlens.trace.server': 'verbose',
        // Line numbers in notebook cells: the test reads which line of a cell is underlined.
        'notebook.lineNumbers': 'on',
    };
    fs.writeFileSync(path.join(userDataDir, 'User', 'settings.json'), JSON.stringify(settings, null, 2));
    for (const file of config.workspaceFiles) {
        fs.copyFileSync(file, path.join(workspace, path.basename(file)));
    }
    return { userDataDir, extensionsDir, workspace };
}

function codeServerEnv(root) {
    // code-server writes its config, logs and state under XDG folders: keep them in the temp root.
    return {
        ...process.env,
        PATH: `${path.dirname(config.node)}:${process.env.PATH}`,
        XDG_CONFIG_HOME: path.join(root, 'xdg-config'),
        XDG_DATA_HOME: path.join(root, 'xdg-data'),
        // No marketplace: point the gallery at a closed loopback port instead of the internet.
        EXTENSIONS_GALLERY: JSON.stringify({
            serviceUrl: 'http://127.0.0.1:9/gallery',
            itemUrl: 'http://127.0.0.1:9/items',
            resourceUrlTemplate: 'http://127.0.0.1:9/resource/{publisher}/{name}/{version}/{path}',
        }),
    };
}

function installVsix(profile, env) {
    step(`install ${path.basename(config.vsix)}`);
    const proc = spawnSync(
        config.node,
        [
            config.codeServer,
            '--user-data-dir', profile.userDataDir,
            '--extensions-dir', profile.extensionsDir,
            '--install-extension', config.vsix,
        ],
        { env, encoding: 'utf8', timeout: 120_000 },
    );
    if (proc.status !== 0) {
        throw new Error(`--install-extension failed (${proc.status}): ${proc.stdout}\n${proc.stderr}`);
    }
    const installed = fs.readdirSync(profile.extensionsDir).filter((d) => d.startsWith('exportlens.exportlens-'));
    if (installed.length !== 1) {
        throw new Error(`the extension is not in ${profile.extensionsDir}: ${fs.readdirSync(profile.extensionsDir)}`);
    }
}

async function startCodeServer(profile, env, root) {
    const port = await freePort();
    step(`start code-server on 127.0.0.1:${port}`);
    const logFile = fs.openSync(path.join(config.artifacts, 'code-server.log'), 'w');
    const child = spawn(
        config.node,
        [
            config.codeServer,
            '--config', path.join(root, 'config.yaml'),
            '--auth', 'none',
            '--bind-addr', `127.0.0.1:${port}`,
            '--user-data-dir', profile.userDataDir,
            '--extensions-dir', profile.extensionsDir,
            '--disable-telemetry',
            '--disable-update-check',
            '--disable-workspace-trust',
            '--disable-getting-started-override',
            profile.workspace,
        ],
        { env, stdio: ['ignore', logFile, logFile], detached: true },
    );
    await waitForHttp(`http://127.0.0.1:${port}/healthz`, child, 60_000);
    return { child, port };
}

/** Stop code-server and its extension host (its own process group, nothing else). */
async function stopProcessGroup(child) {
    const signal = (sig) => {
        try {
            process.kill(-child.pid, sig);
        } catch {
            // already gone
        }
    };
    if (child.exitCode !== null) {
        return;
    }
    const exited = new Promise((resolve) => child.once('exit', resolve));
    signal('SIGTERM');
    const timer = setTimeout(() => signal('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
    // The language server is a child of the extension host: give it a moment to see
    // its stdin close, then make sure nothing of the group is left.
    await new Promise((r) => setTimeout(r, 1000));
    signal('SIGKILL');
}

async function screenshot(page, name) {
    const file = path.join(config.artifacts, name);
    await page.screenshot({ path: file });
    result.screenshots.push(file);
}

/** Run a command by its palette title (F1 opens the palette in code-server too). */
async function runCommand(page, title) {
    await page.keyboard.press('F1');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible', timeout: UI_WAIT });
    await input.fill(`>${title}`);
    // Enter runs the focused row: on a loaded machine the list may still show (and focus)
    // rows of the text before the filter caught up, so wait for the command to have focus.
    const row = page.locator('.quick-input-widget .monaco-list-row.focused', { hasText: title }).first();
    await row.waitFor({ state: 'visible', timeout: UI_WAIT });
    await page.keyboard.press('Enter');
    // Accepted, the palette closes: one still open (or its input gone before Enter, the
    // key then typed elsewhere) is told apart from a command that ran and did nothing.
    await page
        .locator('.quick-input-widget')
        .first()
        .waitFor({ state: 'hidden', timeout: UI_WAIT })
        .catch(() => {
            throw new Error(`the command palette still shows after Enter on "${title}"`);
        });
}

/** What the workbench shows, for the error of a failed run (no screenshot needed). */
async function workbenchState(page) {
    return page.evaluate(() => {
        const shown = (el) => !!el && el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
        const text = (el) => (el ? el.textContent.replace(/\u00a0/g, ' ').trim().slice(0, 300) : null);
        const active = document.activeElement;
        const quick = document.querySelector('.quick-input-widget');
        const panel = document.querySelector('.part.panel');
        return {
            focus: active ? `${active.tagName.toLowerCase()}.${String(active.className).split(' ').join('.')}` : null,
            palette: shown(quick)
                ? { value: quick.querySelector('input')?.value ?? null, focusedRow: text(quick.querySelector('.monaco-list-row.focused')) }
                : null,
            panel: shown(panel)
                ? { title: text(panel.querySelector('.composite.title .action-item.checked, .composite.title .title-label')), outputViews: Array.from(panel.querySelectorAll('.output-view'), shown) }
                : null,
            tabs: Array.from(document.querySelectorAll('.tabs-container .tab'), (t) => (t.getAttribute('aria-label') ?? text(t)) + (t.classList.contains('dirty') ? ' (unsaved)' : '')),
            notifications: Array.from(document.querySelectorAll('.notification-toast .notification-list-item-message'), text),
            dialogs: Array.from(document.querySelectorAll('.monaco-dialog-box'), text),
        };
    });
}

async function openFile(page, name) {
    step(`open ${name}`);
    // A click in the Explorer, as a person would: no dependence on quick-open ranking.
    const row = page.locator('.explorer-folders-view .monaco-list-row', { hasText: name }).first();
    await row.waitFor({ state: 'visible', timeout: UI_WAIT });
    await row.click();
    await page
        .locator('.tabs-container .tab.active', { hasText: name })
        .first()
        .waitFor({ state: 'visible', timeout: UI_WAIT });
    await page.locator('.editor-instance .monaco-editor .view-lines').first().waitFor({ timeout: UI_WAIT });
}

/** The log file VS Code keeps for the "exportlens" LogOutputChannel, if written yet. */
function findChannelLog(dir) {
    if (!fs.existsSync(dir)) {
        return undefined;
    }
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) {
            const found = findChannelLog(full);
            if (found) {
                return found;
            }
        } else if (entry.name === 'exportlens.log') {
            return full;
        }
    }
    return undefined;
}

/**
 * The exportlens output channel's text. The panel only renders the lines in view, so
 * the whole text is read from the log file behind the channel (same lines).
 */
async function outputText(page, profile) {
    const file = findChannelLog(path.join(profile.userDataDir, 'logs'));
    if (file) {
        return fs.readFileSync(file, 'utf8');
    }
    return page.evaluate(() => {
        const pane = document.querySelector('.output-view, [id="workbench.panel.output"]');
        const lines = pane ? pane.querySelectorAll('.view-line') : [];
        return Array.from(lines, (l) => l.textContent.replace(/\u00a0/g, ' ')).join('\n');
    });
}

/** "exportlens: Show Output" must bring up the Output panel on the exportlens channel. */
async function waitForOutputPanel(page) {
    step('wait for the Output panel on the exportlens channel');
    // The visible one: the workbench may keep another, hidden, instance of a view.
    await page.locator('.part.panel .output-view:visible').first().waitFor({ state: 'visible', timeout: UI_WAIT });
    const select = page.locator('.part.panel select[aria-label="Switch Output"]:visible').first();
    const end = Date.now() + UI_WAIT;
    while ((await select.inputValue().catch(() => '')) !== 'exportlens') {
        if (Date.now() > end) {
            throw new Error('the Output panel does not show the exportlens channel');
        }
        await page.waitForTimeout(250);
    }
}

async function waitForOutput(page, profile, pattern, what) {
    step(`wait for the output channel to show ${what}`);
    const end = Date.now() + TIMEOUT;
    let text = '';
    while (Date.now() < end) {
        text = await outputText(page, profile);
        if (pattern.test(text)) {
            result.output = text;
            return text;
        }
        await page.waitForTimeout(500);
    }
    result.output = text;
    throw new Error(`the exportlens output never showed ${what}; it shows:\n${text}`);
}

/** Problems panel rows as text ("<message> <code> [Ln 10, Col 9]"). */
async function problemRows(page) {
    return page.evaluate(() =>
        Array.from(document.querySelectorAll('.markers-panel .monaco-list-row'), (row) =>
            (row.getAttribute('aria-label') ?? '') + ' || ' + row.textContent.replace(/\u00a0/g, ' '),
        ),
    );
}

async function waitForProblems(page) {
    step(`wait for ${config.expectProblems.length} problems in the Problems panel`);
    const end = Date.now() + TIMEOUT;
    let missing = config.expectProblems;
    let rows = [];
    while (Date.now() < end) {
        rows = await problemRows(page);
        missing = config.expectProblems.filter(
            (p) => !rows.some((r) => r.includes(p.code) && r.includes(`[Ln ${p.line}, Col `)),
        );
        if (missing.length === 0) {
            result.problems = rows;
            return;
        }
        await page.waitForTimeout(500);
    }
    result.problems = rows;
    throw new Error(`missing in the Problems panel: ${JSON.stringify(missing)}; rows: ${JSON.stringify(rows)}`);
}

async function hoverAt(page, hover) {
    step(`hover ${hover.file}:${hover.line}:${hover.column}`);
    await openFile(page, hover.file);
    // Go to line:column puts the cursor on the argument; "Show or Focus Hover" then shows
    // the same hover the mouse would, without depending on pixel positions.
    await page.keyboard.press('Control+G');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible', timeout: UI_WAIT });
    await input.fill(`:${hover.line}:${hover.column}`);
    await page.keyboard.press('Enter');
    await input.waitFor({ state: 'hidden', timeout: UI_WAIT });
    const end = Date.now() + TIMEOUT;
    let text = '';
    while (Date.now() < end) {
        await runCommand(page, 'Show or Focus Hover');
        const widget = page.locator('.monaco-hover:not(.hidden)').first();
        try {
            await widget.waitFor({ state: 'visible', timeout: 5_000 });
            text = (await widget.innerText()).trim();
        } catch {
            text = '';
        }
        if (text.includes(hover.expect)) {
            result.hover = text;
            // The screenshot waits for the hover's fade-in to finish.
            await page.waitForFunction(() => {
                const el = document.querySelector('.monaco-hover:not(.hidden)');
                return el !== null && el.getAnimations({ subtree: true }).every((a) => a.playState === 'finished');
            }, undefined, { timeout: UI_WAIT });
            return;
        }
        // Not there yet (the export is still running): close the hover and ask again.
        await page.keyboard.press('Escape');
        await page.waitForTimeout(1000);
    }
    result.hover = text;
    throw new Error(`the hover at ${hover.file}:${hover.line}:${hover.column} never showed ${hover.expect}; last: ${text}`);
}

/** The text of the exportlens status bar item ("" when hidden). */
async function statusBarText(page) {
    return page.evaluate(() => {
        const items = Array.from(document.querySelectorAll('.statusbar-item'));
        const ours = items.find((el) => /exportlens/.test(el.textContent ?? '') && el.offsetParent !== null);
        return ours ? ours.textContent.replace(/\u00a0/g, ' ').trim() : '';
    });
}

async function waitForActivation(page) {
    step('wait for the extension to be active (its status item)');
    const end = Date.now() + TIMEOUT;
    while (Date.now() < end) {
        if (await statusBarText(page)) {
            return;
        }
        await page.waitForTimeout(250);
    }
    throw new Error('the exportlens status item never showed: the extension did not activate');
}

async function waitForStatusBar(page, file, expected) {
    step(`wait for the status bar to read "${expected}" on ${file}`);
    const end = Date.now() + TIMEOUT;
    let text = '';
    while (Date.now() < end) {
        text = await statusBarText(page);
        if (text === expected) {
            result.statusBar[file] = text;
            return;
        }
        await page.waitForTimeout(250);
    }
    result.statusBar[file] = text;
    throw new Error(`the status bar on ${file} reads "${text}", not "${expected}"`);
}

/** "Show Exported Graph" on the active file: a read-only tab with torch's graph text. */
async function showGraph(page, graph) {
    step(`show the exported graph of ${graph.file}`);
    await runCommand(page, 'exportlens: Show Exported Graph');
    const tab = page.locator('.tabs-container .tab.active', { hasText: `${graph.file} (all targets).graph` }).first();
    await tab.waitFor({ state: 'visible', timeout: UI_WAIT });
    const end = Date.now() + TIMEOUT;
    let text = '';
    while (Date.now() < end) {
        text = await page.evaluate(() => {
            const editor = document.querySelector('.editor-group-container.active .monaco-editor .view-lines');
            return editor ? Array.from(editor.querySelectorAll('.view-line'), (l) => l.textContent.replace(/\u00a0/g, ' ')).join('\n') : '';
        });
        if (graph.expect.every((e) => text.includes(e))) {
            result.graph = text;
            return;
        }
        await page.waitForTimeout(250);
    }
    result.graph = text;
    throw new Error(`the graph document lacks ${JSON.stringify(graph.expect)}; it shows:\n${text}`);
}

async function restartServer(page, profile) {
    step('restart the server with the command');
    const before = (await outputText(page, profile)).match(/Server running/g)?.length ?? 0;
    await runCommand(page, 'exportlens: Restart Server');
    const end = Date.now() + TIMEOUT;
    while (Date.now() < end) {
        const text = await outputText(page, profile);
        if ((text.match(/Server running/g)?.length ?? 0) > before && /\(Re\)starting the server: restart command/.test(text)) {
            result.output = text;
            return;
        }
        await page.waitForTimeout(500);
    }
    throw new Error('the server did not come back after "exportlens: Restart Server"');
}

/** An interpreter without exportlens: an error notification with the fix, and the status item says so. */
async function waitForNotInstalled(page) {
    step('wait for the "not installed" notification');
    const toast = page.locator('.notification-toast', { hasText: 'exportlens is not installed in' }).first();
    await toast.waitFor({ state: 'visible', timeout: TIMEOUT });
    result.notification = (await toast.innerText()).replace(/\s+/g, ' ').trim();
    await waitForStatusBar(page, 'not-installed', 'exportlens: not running');
    await screenshot(page, 'vscode-not-installed.png');
}

/** Merge `extra` into the user settings.json, typed in the editor as a person would, and save. */
async function typeSettings(page, profile, extra) {
    const file = path.join(profile.userDataDir, 'User', 'settings.json');
    const settings = JSON.parse(fs.readFileSync(file, 'utf8'));
    // Through the editor: the workbench does not pick up outside writes to the file here.
    // (VS Code 1.139 shows it in a modal editor, not a tab.)
    await runCommand(page, 'Preferences: Open User Settings (JSON)');
    const lines = page.locator('.monaco-editor .view-lines', { hasText: 'exportlens.trace.server' }).first();
    await lines.waitFor({ state: 'visible', timeout: UI_WAIT });
    await lines.click();
    await page.keyboard.press('Control+A');
    await page.keyboard.press('Delete');
    // One line, and the profile turns auto-closing and auto-indent off: the text lands as is.
    const wanted = JSON.stringify({ ...settings, ...extra });
    await page.keyboard.insertText(wanted);
    await page.keyboard.press('Control+S');
    const saved = Date.now() + UI_WAIT;
    while (!fs.readFileSync(file, 'utf8').includes(Object.keys(extra)[0])) {
        if (Date.now() > saved) {
            throw new Error(`settings.json was not saved: ${fs.readFileSync(file, 'utf8')}`);
        }
        await page.waitForTimeout(250);
    }
    if (JSON.stringify(JSON.parse(fs.readFileSync(file, 'utf8'))) !== wanted) {
        throw new Error(`settings.json holds something else than was typed: ${fs.readFileSync(file, 'utf8')}`);
    }
    // Close the modal (its header's close button) so the workbench takes keys again.
    const close = page.locator('.modal-editor-header .codicon-close, .modal-editor-part .codicon-close').first();
    await close.click({ timeout: UI_WAIT });
    await page.locator('.monaco-modal-editor-block').first().waitFor({ state: 'hidden', timeout: UI_WAIT });
}

/**
 * Edit the user settings file as a person would in settings.json: turn a diagnostic code
 * off and set the worker count. The worker count restarts the server; the code switch
 * reaches it through didChangeConfiguration and the row leaves the Problems panel.
 */
async function changeSettings(page, profile, change) {
    step(`change settings: ${JSON.stringify(change.settings)}`);
    const before = (await outputText(page, profile)).match(/Server running/g)?.length ?? 0;
    await typeSettings(page, profile, change.settings);
    const end = Date.now() + TIMEOUT;
    let text = '';
    while (Date.now() < end) {
        text = await outputText(page, profile);
        if ((text.match(/Server running/g)?.length ?? 0) > before && text.includes('(Re)starting the server: settings changed')) {
            break;
        }
        await page.waitForTimeout(500);
    }
    if (!text.includes('(Re)starting the server: settings changed')) {
        throw new Error('changing exportlens.workers did not restart the server');
    }
    step(`wait for ${change.gone.code} to leave the Problems panel`);
    await runCommand(page, 'View: Focus Problems (Errors, Warnings, Infos)');
    let rows = [];
    while (Date.now() < end) {
        rows = await problemRows(page);
        const gone = !rows.some((r) => r.includes(change.gone.code));
        const kept = change.kept.every((p) => rows.some((r) => r.includes(p.code) && r.includes(`[Ln ${p.line}, Col `)));
        if (gone && kept) {
            result.problemsAfterChange = rows;
            result.output = await outputText(page, profile);
            return;
        }
        await page.waitForTimeout(500);
    }
    result.problemsAfterChange = rows;
    throw new Error(`after the settings change the Problems panel shows ${JSON.stringify(rows)}`);
}


// ---- issue 12: inlay hints, code lenses, quick fixes, the graph view -------------------

/** Put the cursor at 1-based line:column of the active editor (Go to Line). */
async function goTo(page, line, column = 1) {
    await page.keyboard.press('Control+G');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible', timeout: UI_WAIT });
    await input.fill(`:${line}:${column}`);
    await page.keyboard.press('Enter');
    await input.waitFor({ state: 'hidden', timeout: UI_WAIT });
}

/** The rendered text of the active editor's line that contains `code` (inlay hints included). */
async function renderedLine(page, code) {
    return page.evaluate((code) => {
        const lines = document.querySelectorAll('.editor-group-container.active .monaco-editor .view-lines .view-line');
        const texts = Array.from(lines, (l) => l.textContent.replace(/\u00a0/g, ' '));
        return texts.find((t) => t.includes(code)) ?? '';
    }, code);
}

/** Wait until the line holding `code` shows `expect` after it (an inlay hint). */
async function waitForHint(page, file, code, expect) {
    step(`wait for the inlay hint "${expect}" on "${code}" in ${file}`);
    const end = Date.now() + TIMEOUT;
    let text = '';
    while (Date.now() < end) {
        text = await renderedLine(page, code);
        const at = text.indexOf(code);
        if (at >= 0 && text.indexOf(expect, at + code.length) >= 0) {
            result.hints[file] = text;
            return text;
        }
        await page.waitForTimeout(250);
    }
    result.hints[file] = text;
    throw new Error(`no inlay hint "${expect}" after "${code}" in ${file}; the line reads: ${text}`);
}

/** The code lens titles shown in the active editor. */
async function lensTitles(page) {
    return page.evaluate(() =>
        Array.from(
            document.querySelectorAll('.editor-group-container.active .monaco-editor .codelens-decoration a'),
            (a) => a.textContent.replace(/\u00a0/g, ' ').trim(),
        ),
    );
}

async function waitForLenses(page, file, expect) {
    step(`wait for code lenses ${JSON.stringify(expect)} in ${file}`);
    const end = Date.now() + TIMEOUT;
    let titles = [];
    while (Date.now() < end) {
        titles = await lensTitles(page);
        if (expect.every((e) => titles.some((t) => t.startsWith(e)))) {
            result.lenses[file] = titles;
            return titles;
        }
        await page.waitForTimeout(250);
    }
    result.lenses[file] = titles;
    throw new Error(`the code lenses in ${file} are ${JSON.stringify(titles)}, not ${JSON.stringify(expect)}`);
}

async function clickLens(page, startsWith) {
    step(`click the code lens "${startsWith}..."`);
    const lens = page
        .locator('.editor-group-container.active .monaco-editor .codelens-decoration a', { hasText: startsWith })
        .first();
    await lens.click({ timeout: UI_WAIT });
}

/** The LSP requests `workspace/executeCommand` the trace shows, as {command, arguments, answered}. */
function executedCommands(text) {
    const sent = [];
    for (const m of text.matchAll(/Sending request 'workspace\/executeCommand - \((\d+)\)'[^\n]*\n[^\n]*?Params: (\{.*?\n\})/gs)) {
        const params = JSON.parse(m[2]);
        const id = m[1];
        const answered = new RegExp(`Received response 'workspace/executeCommand - \\(${id}\\)'`).test(text);
        const failed = new RegExp(`Request workspace/executeCommand failed|Received response 'workspace/executeCommand - \\(${id}\\)'[^\\n]*\\n[^\\n]*?Error`).test(text);
        sent.push({ command: params.command, arguments: params.arguments, answered, failed });
    }
    return sent;
}

async function waitForCommand(page, profile, command, before) {
    step(`wait for ${command} to reach the server and be answered`);
    const end = Date.now() + TIMEOUT;
    let seen = [];
    while (Date.now() < end) {
        seen = executedCommands(await outputText(page, profile)).slice(before);
        const done = seen.find((c) => c.command === command && c.answered);
        if (done) {
            return done;
        }
        await page.waitForTimeout(250);
    }
    throw new Error(`${command} was not answered; executeCommand requests after the click: ${JSON.stringify(seen)}`);
}

/** The active editor's text (a virtual document: every line is rendered, it is short). */
async function activeText(page) {
    return page.evaluate(() => {
        const editor = document.querySelector('.editor-group-container.active .monaco-editor .view-lines');
        return editor ? Array.from(editor.querySelectorAll('.view-line'), (l) => l.textContent.replace(/\u00a0/g, ' ')).join('\n') : '';
    });
}

async function activeTab(page) {
    return page.evaluate(() => {
        const tab = document.querySelector('.editor-group-container.active .tabs-container .tab.active');
        return tab ? tab.getAttribute('aria-label') ?? tab.textContent : '';
    });
}

/** "Ln 13, Col 9" of the status bar: where the cursor is. */
async function cursorPosition(page) {
    return page.evaluate(() => {
        const item = document.getElementById('status.editor.selection');
        return item ? item.textContent.replace(/\u00a0/g, ' ').trim() : '';
    });
}

async function waitForView(page, tabText, expect) {
    step(`wait for the graph view "${tabText}" showing ${JSON.stringify(expect)}`);
    const tab = page.locator('.tabs-container .tab.active', { hasText: tabText }).first();
    await tab.waitFor({ state: 'visible', timeout: UI_WAIT });
    const end = Date.now() + TIMEOUT;
    let text = '';
    while (Date.now() < end) {
        text = await activeText(page);
        if (expect.every((e) => text.includes(e))) {
            return text;
        }
        await page.waitForTimeout(250);
    }
    throw new Error(`the graph view lacks ${JSON.stringify(expect)}; it shows:\n${text}`);
}

/** Poll the active tab and the cursor ("Ln 13, Col 9") until `reached(tab, where)`, up to
 * UI_WAIT; the last of each, and whether it got there. */
async function watchCursor(page, reached) {
    const end = Date.now() + UI_WAIT;
    let tab = '';
    let where = '';
    while (Date.now() < end) {
        tab = await activeTab(page);
        where = await cursorPosition(page);
        if (reached(tab, where)) {
            return { tab, where, ok: true };
        }
        await page.waitForTimeout(100);
    }
    return { tab, where, ok: false };
}

/** Wait until the editor shows `file` with the cursor on `line` (1-based). */
async function waitForJump(page, file, line, how) {
    // The source's own tab, not the graph view (whose name also starts with the file's).
    const { tab, where, ok } = await watchCursor(page, (tab, where) => tab.startsWith(file) && !tab.includes('.nodes') && where.startsWith(`Ln ${line},`));
    if (!ok) {
        throw new Error(`${how} did not jump to ${file}:${line}; the active tab is "${tab}" at "${where}"`);
    }
    result.jumps.push({ how, tab, where });
}

/** Wait until the active tab (named with `tabText`) has the cursor at `line`:`column`. */
async function waitForCursor(page, tabText, line, column) {
    const at = new RegExp(`^Ln ${line}, Col ${column}(\\D|$)`);
    const { tab, where, ok } = await watchCursor(page, (tab, where) => tab.includes(tabText) && at.test(where));
    if (!ok) {
        throw new Error(`the cursor never reached ${line}:${column} in ${tabText}; the active tab is "${tab}" at "${where}"`);
    }
}

/**
 * The graph view: a row's `file.py:LINE` is a link (Ctrl+click) and a definition (F12);
 * both must land on that line of the source file.
 */
async function followGraphLinks(page, view) {
    const rows = (await activeText(page)).split('\n');
    const index = rows.findIndex((r) => r.includes(view.linkText));
    if (index < 0) {
        throw new Error(`no row with ${view.linkText} in the graph view:\n${rows.join('\n')}`);
    }
    step(`Ctrl+click ${view.linkText} in the graph view`);
    const link = page
        .locator('.editor-group-container.active .view-line', { hasText: view.linkText })
        .first()
        .locator('.detected-link', { hasText: view.linkText.split(':')[0] })
        .first();
    await link.waitFor({ state: 'visible', timeout: UI_WAIT });
    // Ctrl+click at the link's place, as a hand does: VS Code re-renders the line's spans
    // when Ctrl is held over a link (the underline decoration), so a click aimed at the
    // span element itself can find it detached and retry until it times out.
    const box = await link.boundingBox();
    if (!box) {
        throw new Error(`the ${view.linkText} link has no box on screen`);
    }
    const [x, y] = [box.x + Math.min(box.width / 2, 12), box.y + box.height / 2];
    await page.mouse.move(x, y);
    await page.keyboard.down('Control');
    try {
        await page.mouse.click(x, y);
    } finally {
        await page.keyboard.up('Control');
    }
    await waitForJump(page, view.file, view.line, 'Ctrl+click');
    step('back to the graph view, F12 on the same link');
    await page.keyboard.press('Control+Alt+-'); // Go Back
    await page.locator('.tabs-container .tab.active', { hasText: '.nodes' }).first().waitFor({ timeout: UI_WAIT });
    const column = rows[index].indexOf(view.linkText) + 2;
    await goTo(page, index + 1, column);
    // F12 acts where the cursor is: not before the view has it on the link.
    await waitForCursor(page, '.nodes', index + 1, column);
    await page.keyboard.press('F12');
    await waitForJump(page, view.file, view.line, 'F12');
}

/** Quick Fix... on a diagnostic's line: pick the fix by title, then save; the problem must go. */
async function applyQuickFix(page, fix) {
    await openFile(page, fix.file);
    step(`open the problems, wait for ${fix.code} on ${fix.file}:${fix.line}`);
    await runCommand(page, 'View: Focus Problems (Errors, Warnings, Infos)');
    await page.locator('.markers-panel').first().waitFor({ timeout: UI_WAIT });
    const end = Date.now() + TIMEOUT;
    const has = (rows) => rows.some((r) => r.includes(fix.code) && r.includes(`[Ln ${fix.line}, Col `));
    while (!has(await problemRows(page))) {
        if (Date.now() > end) {
            throw new Error(`${fix.code} never showed at line ${fix.line}: ${JSON.stringify(await problemRows(page))}`);
        }
        await page.waitForTimeout(250);
    }
    await openFile(page, fix.file);
    await goTo(page, fix.line, fix.column);
    step(`Quick Fix... on ${fix.file}:${fix.line}`);
    const menuEnd = Date.now() + TIMEOUT;
    let titles = [];
    for (;;) {
        await runCommand(page, 'Quick Fix...');
        const menu = page.locator('.action-widget').first();
        await menu.waitFor({ state: 'visible', timeout: UI_WAIT }).catch(() => undefined);
        titles = await page.evaluate(() =>
            Array.from(document.querySelectorAll('.action-widget .monaco-list-row'), (r) => r.textContent.replace(/\u00a0/g, ' ').trim()),
        );
        if (titles.some((t) => t.includes(fix.title))) {
            break;
        }
        // A fix arrives with the export's result: close the menu and ask again.
        await page.keyboard.press('Escape');
        if (Date.now() > menuEnd) {
            throw new Error(`Quick Fix... never offered "${fix.title}"; it offered ${JSON.stringify(titles)}`);
        }
        await page.waitForTimeout(1000);
    }
    result.quickFixes = titles;
    await screenshot(page, 'vscode-quick-fix.png');
    await page.locator('.action-widget .monaco-list-row', { hasText: fix.title }).first().click();
    await page.keyboard.press('Control+S');
    step(`wait for ${fix.code} to leave the Problems panel`);
    await runCommand(page, 'View: Focus Problems (Errors, Warnings, Infos)');
    let rows = [];
    while (Date.now() < end + TIMEOUT) {
        rows = await problemRows(page);
        if (!rows.some((r) => r.includes(fix.code))) {
            result.problemsAfterFix = rows;
            return;
        }
        await page.waitForTimeout(500);
    }
    result.problemsAfterFix = rows;
    throw new Error(`after the quick fix the Problems panel still shows ${fix.code}: ${JSON.stringify(rows)}`);
}

/** `exportlens.inlayHints: false` in settings.json: the running server drops the hints. */
async function hintsOff(page, profile, module) {
    step('turn exportlens.inlayHints off in settings.json');
    await typeSettings(page, profile, { 'exportlens.inlayHints': false });
    await openFile(page, module.file);
    step(`wait for the hint to leave "${module.hint.code}"`);
    const end = Date.now() + TIMEOUT;
    let text = '';
    while (Date.now() < end) {
        text = await renderedLine(page, module.hint.code);
        if (text.trim() === module.hint.code) {
            result.hintsOff = text;
            result.output = await outputText(page, profile);
            return;
        }
        await page.waitForTimeout(250);
    }
    throw new Error(`with exportlens.inlayHints false the line still reads: ${text}`);
}

/** Everything issue 12 adds, on a model (net.py) whose classes live in layers.py. */
async function features(page, profile, f) {
    await waitForOutput(page, profile, /Server running/, 'a running server');
    // The declaring file: its hint-less target line still gets the lenses.
    await openFile(page, f.target.file);
    await waitForLenses(page, f.target.file, f.target.lenses);
    // The module where the code lives: hints after its lines, lenses on the class line.
    await openFile(page, f.module.file);
    await waitForHint(page, f.module.file, f.module.hint.code, f.module.hint.expect);
    await waitForLenses(page, f.module.file, f.module.lenses);
    await runCommand(page, 'View: Hide Panel'); // the output trace is not what the picture is about
    await screenshot(page, 'vscode-inlay-hints.png');

    // The status lens says "exported": clicking it exports again.
    const before = executedCommands(await outputText(page, profile)).length;
    await clickLens(page, f.module.lenses[0]);
    const reexport = await waitForCommand(page, profile, 'exportlens.reexport', before);
    result.lensCommands.push(reexport);
    // "Show graph": the graph view, whose rows jump to their source line.
    await clickLens(page, 'Show graph');
    await waitForView(page, '.nodes', f.view.expect);
    result.graph = await activeText(page);
    await screenshot(page, 'vscode-graph-view.png');
    await followGraphLinks(page, f.view);

    // From a source line: the nodes it produced.
    step(`Show Nodes of This Line on ${f.module.file}:${f.lineNodes.line}`);
    await openFile(page, f.module.file);
    await goTo(page, f.lineNodes.line, 9);
    await runCommand(page, 'exportlens: Show Nodes of This Line');
    result.lineNodes = await waitForView(page, `${f.module.file}:${f.lineNodes.line}`, f.lineNodes.expect);

    await hintsOff(page, profile, f.module);
    await applyQuickFix(page, f.quickFix);
}

/**
 * Model Explorer's page in the webview: an iframe (the webview) holding an iframe (its
 * `active-frame` document) holding the webview's own `<iframe>` of the server's page.
 */
function pictureFrame(page) {
    return page.frameLocator('iframe.webview.ready').frameLocator('iframe#active-frame').frameLocator('iframe');
}

/** Wait until the picture's frame shows the graph view ("op node count" in its side panel). */
async function waitForPicture(page, what) {
    step(`wait for ${what}`);
    const frame = pictureFrame(page);
    const end = Date.now() + TIMEOUT;
    let text = '';
    while (Date.now() < end) {
        text = await frame.locator('body').innerText({ timeout: 5_000 }).catch(() => '');
        if (/op node count/i.test(text)) {
            return { frame, text };
        }
        await page.waitForTimeout(500);
    }
    throw new Error(`the webview never showed Model Explorer's graph view; its frame reads:\n${text.slice(0, 2000)}`);
}

/** The screenshot, checked not blank: the webview's box must hold many distinct colours. */
async function pictureScreenshot(page, name) {
    const box = await page.locator('iframe.webview.ready').first().boundingBox();
    if (!box) {
        throw new Error('the webview has no box on screen');
    }
    const file = path.join(config.artifacts, name);
    await page.screenshot({ path: file });
    result.screenshots.push(file);
    const clip = await page.screenshot({ clip: box });
    // Distinct bytes in the PNG's compressed stream say little; ask the browser to count
    // colours of the same pixels instead.
    const colours = await page.evaluate(async (b64) => {
        const img = new Image();
        img.src = `data:image/png;base64,${b64}`;
        await img.decode();
        const canvas = document.createElement('canvas');
        canvas.width = img.width;
        canvas.height = img.height;
        const ctx = canvas.getContext('2d');
        ctx.drawImage(img, 0, 0);
        const data = ctx.getImageData(0, 0, img.width, img.height).data;
        const seen = new Set();
        for (let i = 0; i < data.length; i += 4) {
            seen.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
        }
        return seen.size;
    }, clip.toString('base64'));
    result.picture.colours = colours;
    result.picture.box = box;
    return colours;
}

/**
 * "exportlens: Show Graph as a Picture" on `p.file`: the webview opens beside the code
 * with Model Explorer's graph view; a node found by its label (Model Explorer's search)
 * and selected there shows its line in the editor.
 */
async function picture(page, profile, p) {
    await waitForOutput(page, profile, /Server running/, 'a running server');
    await openFile(page, p.file);
    await waitForLenses(page, p.file, p.lenses);
    await runCommand(page, 'exportlens: Show Graph as a Picture');
    step('wait for the webview beside the code');
    await page.locator('iframe.webview.ready').first().waitFor({ state: 'visible', timeout: UI_WAIT });
    result.picture.groups = await page.evaluate(() => document.querySelectorAll('.editor-group-container').length);
    result.picture.src = await page
        .frameLocator('iframe.webview.ready')
        .frameLocator('iframe#active-frame')
        .locator('iframe')
        .getAttribute('src', { timeout: UI_WAIT });
    const { frame, text } = await waitForPicture(page, "Model Explorer's graph view in the webview");
    result.picture.text = text.slice(0, 4000);
    // The layout runs in a worker: wait for the canvas before the picture is taken.
    await frame.locator('canvas').first().waitFor({ state: 'visible', timeout: UI_WAIT });
    await page.waitForTimeout(2000);
    await pictureScreenshot(page, 'vscode-graph-picture.png');

    step(`select the node labelled ${p.node.label} in the picture`);
    const search = frame.locator('input[placeholder*="Search"]').first();
    await search.waitFor({ state: 'visible', timeout: UI_WAIT });
    await search.fill(p.node.label);
    const hit = frame.locator('div.label > span.node-label').filter({ hasText: new RegExp(`^\\s*${p.node.label.replace('.', '\\.')}\\s*$`) }).first();
    await hit.waitFor({ state: 'visible', timeout: UI_WAIT });
    // Alt+click on a search result selects that node in the graph (Model Explorer's own gesture).
    await hit.click({ modifiers: ['Alt'] });
    const { tab, where, ok } = await watchCursor(page, (tab, where) => tab.startsWith(p.node.file) && where.startsWith(`Ln ${p.node.line},`));
    result.picture.jump = { tab, where };
    if (!ok) {
        throw new Error(`selecting ${p.node.label} in the picture did not show ${p.node.file}:${p.node.line}; the active tab is "${tab}" at "${where}"`);
    }
    await screenshot(page, 'vscode-graph-picture-jump.png');

    // The cursor's line selects its node in the picture, and the editor stays where it is.
    step(`cursor to ${p.node.file}:${p.cursor.line}: the picture selects ${p.cursor.node}`);
    await goTo(page, p.cursor.line, 9);
    const body = frame.locator('body');
    const cursorEnd = Date.now() + UI_WAIT;
    let wish = {};
    while ((wish = await body.evaluate(() => window.__exportlensCursor ?? {}).catch(() => ({}))).selected !== p.cursor.node) {
        if (Date.now() > cursorEnd) {
            throw new Error(`the cursor on line ${p.cursor.line} did not select ${p.cursor.node} in the picture: ${JSON.stringify(wish)}`);
        }
        await page.waitForTimeout(250);
    }
    result.picture.cursor = wish;
    await page.waitForTimeout(1500);
    result.picture.cursorStays = { tab: await activeTab(page), where: await cursorPosition(page) };
    await screenshot(page, 'vscode-graph-picture-cursor.png');
    const uiState = () => body.evaluate(() => JSON.parse(new URLSearchParams(location.search).get('data')).uiState.paneStates[0]);
    result.picture.uiStateBefore = await uiState();

    // A new result (the module edited and saved): the picture shows it, keeping its view.
    step(`edit ${p.node.file}:${p.cursor.line} and save: the picture reloads with the new graph`);
    await body.evaluate(() => {
        window.__exportlensOld = true;
    });
    await goTo(page, p.cursor.line, 200); // the end of the line
    await page.keyboard.type(p.edit.append);
    await page.keyboard.press('Control+S');
    const reloadEnd = Date.now() + TIMEOUT;
    let labels = [];
    for (;;) {
        const reloaded = await body
            // The side panel may show the restored node's info instead of the graph's: a canvas says it drew.
            .evaluate(() => window.__exportlensOld !== true && document.querySelector('canvas') !== null)
            .catch(() => false);
        if (reloaded) {
            labels = await body.evaluate(() =>
                fetch('exportlens/graphs/0.json').then((r) => r.json()).then((g) => g.graphs[0].nodes.map((n) => n.label)),
            );
            if (labels.includes(p.edit.label)) {
                break;
            }
        }
        if (Date.now() > reloadEnd) {
            throw new Error(`the picture never showed ${p.edit.label} after the edit; labels: ${JSON.stringify(labels)}`);
        }
        await page.waitForTimeout(500);
    }
    result.picture.labelsAfter = labels;
    const restoredEnd = Date.now() + UI_WAIT;
    let after = {};
    while ((after = await uiState().catch(() => ({}))).selectedNodeId !== result.picture.uiStateBefore.selectedNodeId) {
        if (Date.now() > restoredEnd) {
            break;
        }
        await page.waitForTimeout(250);
    }
    result.picture.uiStateAfter = after;
    await page.waitForTimeout(1000);
    await screenshot(page, 'vscode-graph-picture-refreshed.png');
}

// ---- issue 49: a Jupyter notebook in VS Code's own notebook editor --------------------

/**
 * Open a notebook from the Explorer, as a person would: VS Code's built-in notebook
 * editor (the `jupyter-notebook` type of the built-in ipynb extension), with no kernel.
 */
async function openNotebook(page, name) {
    step(`open ${name} in the notebook editor`);
    const row = page.locator('.explorer-folders-view .monaco-list-row', { hasText: name }).first();
    const end = Date.now() + UI_WAIT;
    for (;;) {
        await row.waitFor({ state: 'visible', timeout: UI_WAIT });
        await row.click();
        await page
            .locator('.tabs-container .tab.active', { hasText: name })
            .first()
            .waitFor({ state: 'visible', timeout: UI_WAIT });
        // The notebook editor, or the JSON in a text editor: opened before the ipynb
        // extension's notebook type is registered (seconds after the workbench shows),
        // VS Code falls back to the text editor.
        let shown = '';
        while (!shown && Date.now() < end) {
            shown = await page.evaluate(() => {
                const group = document.querySelector('.editor-group-container.active');
                const visible = (el) => !!el && el.getClientRects().length > 0;
                // The notebook editor is drawn in an overlay over its group, not inside it.
                if (Array.from(document.querySelectorAll('.notebook-editor .cell-list-container .code-cell-row .view-lines')).some(visible)) {
                    return 'notebook';
                }
                const text = Array.from(group?.querySelectorAll('.monaco-editor') ?? []).find((e) => !e.closest('.notebook-editor'));
                return visible(text) ? 'text' : '';
            });
            if (!shown) {
                await page.waitForTimeout(250);
            }
        }
        if (shown === 'notebook') {
            return;
        }
        if (Date.now() > end) {
            throw new Error(`${name} never opened in the notebook editor (last: ${shown || 'nothing'})`);
        }
        step(`${name} opened as text (the notebook type is not registered yet): close it, open it again`);
        const tab = page.locator('.tabs-container .tab.active', { hasText: name }).first();
        await tab.hover();
        await tab.locator('.tab-actions .action-label').first().click({ timeout: UI_WAIT });
        await tab.waitFor({ state: 'detached', timeout: UI_WAIT });
        await page.waitForTimeout(1000);
    }
}

/** The notebook editor's cell list (`:visible`: the workbench may keep a hidden one). */
const CELL_LIST = '.notebook-editor .cell-list-container';

/**
 * The notebook's rendered cells: `{index, kind, lines, squiggles}`, `index` the cell's
 * number from 1 as Jupyter counts (markdown cells included), `lines` the drawn lines
 * of a code cell's editor by their 1-based line number, `squiggles` the diagnostics'
 * underlines drawn there as `{severity, line}`. A cell editor draws only the lines in
 * view, so a line's number comes from its position in the editor, not from its order.
 */
async function notebookCells(page) {
    return page.evaluate((selector) => {
        const list = Array.from(document.querySelectorAll(selector)).find((el) => el.getClientRects().length > 0);
        if (!list) {
            return { total: 0, cells: [] };
        }
        const rows = Array.from(list.querySelectorAll('.monaco-list-row[data-index]'));
        const cells = rows
            .map((row) => {
                const index = Number(row.getAttribute('data-index')) + 1;
                const kind = row.classList.contains('code-cell-row') ? 'code' : row.classList.contains('markdown-cell-row') ? 'markdown' : 'other';
                const editor = kind === 'code' ? row.querySelector('.monaco-editor') : null;
                if (!editor) {
                    return { index, kind, lines: {}, squiggles: [] };
                }
                // A drawn line, its overlays and its number are placed at the same `top`
                // (notebook.lineNumbers is on in this profile).
                const numberAt = new Map(
                    Array.from(editor.querySelectorAll('.margin-view-overlays > div'), (d) => [
                        d.style.top,
                        Number(d.querySelector('.line-numbers')?.textContent),
                    ]),
                );
                const lineOf = (el) => {
                    const placed = el.closest('.view-line, .view-overlays > div');
                    return (placed && numberAt.get(placed.style.top)) || null;
                };
                const lines = {};
                for (const l of editor.querySelectorAll('.view-lines .view-line')) {
                    lines[lineOf(l)] = l.textContent.replace(/\u00a0/g, ' ');
                }
                const squiggles = Array.from(editor.querySelectorAll('.view-overlays [class*="squiggly-"]'), (el) => ({
                    severity: (/squiggly-(error|warning|info|hint)/.exec(el.className) ?? [])[1] ?? el.className,
                    line: lineOf(el),
                }));
                // The cursor's line (every cell editor keeps one, line 1 until moved).
                const cursor = editor.querySelector('.cursors-layer .cursor');
                const cursorLine = cursor ? numberAt.get(cursor.style.top) ?? null : null;
                return { index, kind, lines, squiggles, cursorLine };
            })
            .sort((a, b) => a.index - b.index);
        return { total: Number(rows[0]?.getAttribute('aria-setsize') ?? 0), cells };
    }, CELL_LIST);
}

/** Scroll the notebook to its first cell, by the mouse wheel over the cell list. */
async function scrollToTop(page) {
    const list = page.locator(`${CELL_LIST}:visible`).first();
    const end = Date.now() + UI_WAIT;
    for (;;) {
        const { cells } = await notebookCells(page);
        const first = cells.find((c) => c.index === 1);
        if (first && (first.kind !== 'code' || '1' in first.lines)) {
            return;
        }
        if (Date.now() > end) {
            throw new Error(`the notebook does not scroll to its first cell: ${JSON.stringify(cells)}`);
        }
        await list.hover();
        await page.mouse.wheel(0, -400);
        await page.waitForTimeout(250);
    }
}

/**
 * Every cell of the notebook, read while scrolling it from the top to the bottom (the
 * list draws only the rows in view, a cell editor only its lines in view).
 */
async function sweepCells(page) {
    step('read every cell of the notebook, scrolling from the top to the bottom');
    await scrollToTop(page);
    const seen = new Map();
    const end = Date.now() + UI_WAIT;
    let total = 0;
    for (let still = 0; still < 3 && Date.now() < end; ) {
        const read = await notebookCells(page);
        total = read.total;
        let grew = false;
        for (const cell of read.cells) {
            const known = seen.get(cell.index) ?? { index: cell.index, kind: cell.kind, lines: {}, squiggles: [] };
            for (const [n, text] of Object.entries(cell.lines)) {
                grew ||= !(n in known.lines);
                known.lines[n] = text;
            }
            for (const sq of cell.squiggles) {
                if (!known.squiggles.some((k) => k.severity === sq.severity && k.line === sq.line)) {
                    known.squiggles.push(sq);
                    grew = true;
                }
            }
            grew ||= !seen.has(cell.index);
            seen.set(cell.index, known);
        }
        still = grew ? 0 : still + 1;
        await page.mouse.wheel(0, 150);
        await page.waitForTimeout(300);
    }
    const cells = [...seen.values()].sort((a, b) => a.index - b.index);
    if (cells.length !== total) {
        throw new Error(`read ${cells.length} of the notebook's ${total} cells: ${JSON.stringify(cells)}`);
    }
    return cells;
}

/** The status bar's texts (the notebook's "Cell 7 of 9"). */
async function statusBarItems(page) {
    return page.evaluate(() =>
        Array.from(document.querySelectorAll('.statusbar-item'), (el) => el.textContent.replace(/\u00a0/g, ' ').trim()).filter(Boolean),
    );
}

/**
 * A problem's row clicked in the Problems panel, as a person would: the notebook editor
 * must reveal its cell ("Cell 7 of 9" in the status bar) with the cursor at its line,
 * and that cell's editor must underline the line.
 */
async function jumpToProblem(page, problem) {
    step(`click the ${problem.code} problem: cell ${problem.cell}, line ${problem.line}`);
    const row = page.locator('.markers-panel .monaco-list-row', { hasText: `[Ln ${problem.line}, Col ` }).filter({ hasText: problem.code }).first();
    await row.click({ timeout: UI_WAIT });
    const end = Date.now() + TIMEOUT;
    let items = [];
    let cell;
    while (Date.now() < end) {
        items = await statusBarItems(page);
        const inCell = items.some((t) => t.startsWith(`Cell ${problem.cell} of `));
        cell = (await notebookCells(page)).cells.find((c) => c.index === problem.cell);
        if (inCell && cell?.cursorLine === problem.line && cell.squiggles.some((sq) => sq.severity === problem.severity && sq.line === problem.line)) {
            result.notebook.jumps = [...(result.notebook.jumps ?? []), { problem, statusBar: items, cell }];
            return;
        }
        await page.waitForTimeout(500);
    }
    throw new Error(`the click on the problem did not show cell ${problem.cell} underlined at line ${problem.line}, the cursor there; status bar: ${JSON.stringify(items)}; the cell: ${JSON.stringify(cell)}`);
}

/** The hover over `argument` on the line holding `code` in cell `cell`, by the mouse. */
async function hoverInCell(page, hover) {
    step(`hover ${hover.argument} in "${hover.code}" of cell ${hover.cell}`);
    const list = page.locator(`${CELL_LIST}:visible`).first();
    const row = list.locator(`.monaco-list-row[data-index="${hover.cell - 1}"]`).first();
    const line = row.locator('.view-lines .view-line', { hasText: hover.code }).first();
    // Scroll from the top until the line is drawn.
    await scrollToTop(page);
    const shown = Date.now() + UI_WAIT;
    while (!(await line.isVisible())) {
        if (Date.now() > shown) {
            throw new Error(`no line "${hover.code}" drawn in cell ${hover.cell}`);
        }
        await list.hover();
        await page.mouse.wheel(0, 100);
        await page.waitForTimeout(250);
    }
    await page.mouse.wheel(0, 100); // off the list's bottom edge
    await page.waitForTimeout(250);
    const end = Date.now() + TIMEOUT;
    let text = '';
    while (Date.now() < end) {
        // Where the argument is drawn: the box of its character in the rendered line.
        const box = await line.evaluate((el, { code, argument }) => {
            const at = el.textContent.replace(/\u00a0/g, ' ').indexOf(code) + code.indexOf(argument);
            const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
            let seen = 0;
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                if (at < seen + node.length) {
                    const range = document.createRange();
                    range.setStart(node, at - seen);
                    range.setEnd(node, at - seen + 1);
                    const r = range.getBoundingClientRect();
                    return { x: r.left + r.width / 2, y: r.top + r.height / 2 };
                }
                seen += node.length;
            }
            return null;
        }, hover);
        if (box === null) {
            throw new Error(`no "${hover.argument}" in the line "${hover.code}" of cell ${hover.cell}`);
        }
        // A click puts the cursor there (the cell's editor takes focus), then the mouse rests.
        await page.mouse.click(box.x, box.y);
        await page.mouse.move(box.x + 1, box.y);
        const widget = page.locator('.monaco-hover:not(.hidden)').first();
        try {
            await widget.waitFor({ state: 'visible', timeout: 5_000 });
            text = (await widget.innerText()).trim();
        } catch {
            text = '';
        }
        if (text.includes(hover.expect)) {
            result.notebook.hover = text;
            await page.waitForFunction(() => {
                const el = document.querySelector('.monaco-hover:not(.hidden)');
                return el !== null && el.getAnimations({ subtree: true }).every((a) => a.playState === 'finished');
            }, undefined, { timeout: UI_WAIT });
            return;
        }
        // Not there yet (the export is still running): move away and come back.
        await page.mouse.move(5, 5);
        await page.keyboard.press('Escape');
        await page.waitForTimeout(1000);
    }
    result.notebook.hover = text;
    throw new Error(`the hover on ${hover.argument} in cell ${hover.cell} never showed ${hover.expect}; last: ${text}`);
}

/**
 * A notebook opened in the notebook editor: the extension activates on it, the client
 * syncs it as a notebook (`notebookDocument/didOpen` in the trace), each problem shows
 * in the Problems panel and, clicked, reveals its own cell underlined at the cell's own
 * line, and the hover on a cell's `forward` argument is exportlens's.
 */
async function notebook(page, profile, nb) {
    await openNotebook(page, nb.file);
    // No Python file is open: the notebook alone activated the extension.
    await waitForOutput(page, profile, /Starting: .* -m exportlens serve/, 'the server start');
    await waitForOutput(page, profile, /Server running/, 'a running server');
    await waitForOutput(page, profile, /Sending notification 'notebookDocument\/didOpen'/, 'notebookDocument/didOpen');
    step('open the Problems panel');
    await runCommand(page, 'View: Focus Problems (Errors, Warnings, Infos)');
    await page.locator('.markers-panel').first().waitFor({ timeout: UI_WAIT });
    step(`wait for ${nb.problems.length} problems in the Problems panel`);
    const end = Date.now() + TIMEOUT;
    let rows = [];
    let missing = nb.problems;
    while (Date.now() < end) {
        rows = await problemRows(page);
        missing = nb.problems.filter((p) => !rows.some((r) => r.includes(p.code) && r.includes(`[Ln ${p.line}, Col `)));
        if (missing.length === 0) {
            break;
        }
        await page.waitForTimeout(500);
    }
    result.problems = rows;
    if (missing.length > 0) {
        throw new Error(`missing in the Problems panel: ${JSON.stringify(missing)}; rows: ${JSON.stringify(rows)}`);
    }
    for (const problem of nb.problems) {
        await jumpToProblem(page, problem);
    }
    await screenshot(page, 'vscode-notebook-problems.png');
    await runCommand(page, 'View: Hide Panel');
    await hoverInCell(page, nb.hover);
    await screenshot(page, 'vscode-notebook-hover.png');
    await page.keyboard.press('Escape');
    await page.mouse.move(5, 5);
    // Every cell once the exports are done: where the underlines are, and are not.
    result.notebook.cells = await sweepCells(page);
    result.output = await outputText(page, profile);
}

async function main() {
    fs.mkdirSync(config.artifacts, { recursive: true });
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'exportlens-vscode-e2e-'));
    const profile = makeProfile(root);
    const env = codeServerEnv(root);
    installVsix(profile, env);
    const { child, port } = await startCodeServer(profile, env, root);
    const require = createRequire(path.join(config.playwrightCore, 'package.json'));
    const { chromium } = require(config.playwrightCore);
    let browser;
    try {
        browser = await chromium.launch({
            executablePath: config.chromium,
            args: [
                '--no-sandbox',
                '--disable-gpu',
                '--disable-background-networking',
                '--disable-component-update',
                '--disable-sync',
                '--no-first-run',
            ],
        });
        const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
        step('load the workbench');
        await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(profile.workspace)}`);
        await page.locator('.monaco-workbench').waitFor({ timeout: 120_000 });
        await page.locator('.explorer-folders-view, .explorer-viewlet').first().waitFor({ timeout: 120_000 });

        if (config.mode === 'notebook') {
            await notebook(page, profile, config.notebook);
            result.ok = true;
            return;
        }
        const first = path.basename(config.workspaceFiles.find((f) => f.endsWith('.py')));
        await openFile(page, first); // onLanguage:python activates the extension
        if (config.mode === 'not-installed') {
            await waitForNotInstalled(page);
            result.ok = true;
            return;
        }
        // The palette lists the commands registered when it opens: on a loaded machine the
        // extension's may come after the Explorer shows. Its status item says it is active.
        await waitForActivation(page);
        if (config.mode === 'picture') {
            // The output channel is read from its log file: no Output panel in the way.
            await picture(page, profile, config.picture);
            result.ok = true;
            return;
        }
        await runCommand(page, 'exportlens: Show Output');
        await waitForOutput(page, profile, /Starting: .* -m exportlens serve/, 'the server start');
        await waitForOutputPanel(page);
        await screenshot(page, 'vscode-output.png');
        if (config.mode === 'plumbing') {
            result.ok = true;
            return;
        }
        if (config.mode === 'features') {
            await features(page, profile, config.features);
            result.ok = true;
            return;
        }
        await waitForOutput(page, profile, /Server running/, 'a running server');
        for (const file of new Set(config.expectProblems.map((p) => p.file))) {
            if (file !== first) {
                await openFile(page, file);
            }
        }
        step('open the Problems panel');
        await runCommand(page, 'View: Focus Problems (Errors, Warnings, Infos)');
        await page.locator('.markers-panel').first().waitFor({ timeout: UI_WAIT });
        await waitForProblems(page);
        await screenshot(page, 'vscode-problems.png');
        const last = [...new Set(config.expectProblems.map((p) => p.file))].at(-1);
        await waitForStatusBar(page, last, config.statusBar[last]);
        await hoverAt(page, config.hover);
        await screenshot(page, 'vscode-hover.png');
        await waitForStatusBar(page, config.hover.file, config.statusBar[config.hover.file]);
        await showGraph(page, config.graph);
        await screenshot(page, 'vscode-graph.png');
        await restartServer(page, profile);
        await changeSettings(page, profile, config.settingsChange);
        await screenshot(page, 'vscode-settings-changed.png');
        result.ok = true;
    } finally {
        if (browser && !result.ok) {
            const [page] = browser.contexts().flatMap((c) => c.pages());
            if (page) {
                await screenshot(page, 'vscode-failure.png').catch(() => undefined);
                result.ui = await workbenchState(page).catch((e) => `unreadable: ${e}`);
                result.output = result.output || (await outputText(page, profile).catch(() => ''));
            }
        }
        await browser?.close().catch(() => undefined);
        const channelLog = findChannelLog(path.join(profile.userDataDir, 'logs'));
        if (channelLog) {
            fs.copyFileSync(channelLog, path.join(config.artifacts, 'exportlens-output.log'));
        }
        await stopProcessGroup(child);
        fs.rmSync(root, { recursive: true, force: true, maxRetries: 3 });
    }
}

main()
    .catch((error) => {
        result.error = error instanceof Error ? `${error.message}\n${error.stack}` : String(error);
    })
    .finally(() => {
        // Also kept with the screenshots, for a look after a failed CI run.
        fs.mkdirSync(config.artifacts, { recursive: true });
        fs.writeFileSync(path.join(config.artifacts, 'result.json'), JSON.stringify(result, null, 2));
        process.stdout.write(`${JSON.stringify(result)}\n`);
        process.exitCode = result.ok ? 0 : 1;
    });
