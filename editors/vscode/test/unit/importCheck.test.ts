// The import check runs real interpreters: the repo's .venv (exportlens installed),
// a Python without exportlens, and a path that does not exist.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import { checkImportable, fixMessage } from '../../src/importCheck';

// out/test/unit/ -> editors/vscode -> repo root
const REPO = path.resolve(__dirname, '..', '..', '..', '..', '..');
const VENV_PYTHON = path.join(REPO, '.venv', 'bin', 'python');

test('the repo venv can import exportlens', async () => {
    assert.ok(fs.existsSync(VENV_PYTHON), `${VENV_PYTHON} exists (run scripts/setup)`);
    const check = await checkImportable(VENV_PYTHON, REPO);
    assert.equal(check.ok, true, JSON.stringify(check));
});

test('a Python without exportlens gets the pip fix', async () => {
    // An isolated interpreter (-I ignores PYTHONPATH and user site) with an empty cwd.
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'exportlens-nopkg-'));
    const wrapper = path.join(empty, 'python-without-exportlens');
    fs.writeFileSync(wrapper, `#!/bin/sh\nexec /usr/bin/python3 -I "$@"\n`, { mode: 0o755 });
    const check = await checkImportable(wrapper, empty);
    assert.equal(check.ok, false);
    if (!check.ok) {
        assert.equal(check.reason, 'not-importable');
        const message = fixMessage(wrapper, check);
        assert.match(message, /exportlens is not installed in/);
        assert.ok(message.includes(`${wrapper} -m pip install exportlens`), message);
        assert.match(message, /exportlens\.interpreter/);
    }
});

test('a missing interpreter says so', async () => {
    const check = await checkImportable('/nonexistent/bin/python', undefined);
    assert.deepEqual(check.ok, false);
    if (!check.ok) {
        assert.equal(check.reason, 'not-found');
        assert.match(fixMessage('/nonexistent/bin/python', check), /was not found/);
    }
});

test('an interpreter that fails for another reason shows its error', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'exportlens-broken-'));
    const broken = path.join(dir, 'python-broken');
    fs.writeFileSync(broken, '#!/bin/sh\necho "Fatal Python error: init failed" >&2\nexit 3\n', { mode: 0o755 });
    const check = await checkImportable(broken, dir);
    assert.equal(check.ok, false);
    if (!check.ok) {
        assert.equal(check.reason, 'failed');
        assert.match(fixMessage(broken, check), /Fatal Python error: init failed/);
    }
});

test('a workspace holding a tokenize.py or attr.py does not break the check', async () => {
    // The check runs in the workspace folder; -P keeps that folder off sys.path.
    const workspace = fs.mkdtempSync(path.join(os.tmpdir(), 'exportlens-shadows-'));
    for (const name of ['attr', 'tokenize', 'msgpack', 'typing_extensions']) {
        fs.writeFileSync(path.join(workspace, `${name}.py`), `raise RuntimeError('the workspace ${name}.py was imported')\n`);
    }
    const check = await checkImportable(VENV_PYTHON, workspace);
    assert.equal(check.ok, true, JSON.stringify(check));
});
