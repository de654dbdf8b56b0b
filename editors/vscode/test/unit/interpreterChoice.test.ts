// Which interpreter runs the server: setting, then the Python extension, then python3.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chooseInterpreter, expandInterpreterPath } from '../../src/interpreterChoice';

const base = { workspaceFolder: '/ws/proj', home: '/home/u' };

test('the setting wins over the Python extension', () => {
    const choice = chooseInterpreter({ ...base, setting: '/opt/py/bin/python', pythonExtension: '/ws/proj/.venv/bin/python' });
    assert.deepEqual(choice, { command: '/opt/py/bin/python', source: 'setting' });
});

test('an empty or blank setting defers to the Python extension', () => {
    for (const setting of [undefined, '', '   ']) {
        const choice = chooseInterpreter({ ...base, setting, pythonExtension: '/ws/proj/.venv/bin/python' });
        assert.deepEqual(choice, { command: '/ws/proj/.venv/bin/python', source: 'python-extension' });
    }
});

test('without either, python3 from PATH', () => {
    assert.deepEqual(chooseInterpreter({ ...base, setting: '', pythonExtension: undefined }), {
        command: 'python3',
        source: 'default',
    });
    assert.deepEqual(chooseInterpreter({ ...base, setting: undefined, pythonExtension: '' }), {
        command: 'python3',
        source: 'default',
    });
});

test('variables, ~ and relative paths are expanded against the workspace folder', () => {
    assert.equal(expandInterpreterPath('${workspaceFolder}/.venv/bin/python', '/ws/proj', '/home/u'), '/ws/proj/.venv/bin/python');
    assert.equal(expandInterpreterPath('${userHome}/py/bin/python', '/ws/proj', '/home/u'), '/home/u/py/bin/python');
    assert.equal(expandInterpreterPath('~/py/bin/python', '/ws/proj', '/home/u'), '/home/u/py/bin/python');
    assert.equal(expandInterpreterPath('.venv/bin/python', '/ws/proj', '/home/u'), '/ws/proj/.venv/bin/python');
    assert.equal(expandInterpreterPath(' python3.11 ', '/ws/proj', '/home/u'), 'python3.11');
    // No folder open: a relative path is left for the OS to resolve from the server's cwd.
    assert.equal(expandInterpreterPath('.venv/bin/python', undefined, '/home/u'), '.venv/bin/python');
});
