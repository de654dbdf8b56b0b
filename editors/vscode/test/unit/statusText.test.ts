// The status bar text for each server answer, and tolerance of malformed answers.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeServerDown, describeStatus, parseStatus } from '../../src/statusText';

test('the server answer is parsed, target objects and plain names alike', () => {
    const status = parseStatus({
        state: 'ok',
        errors: 0,
        targets: [{ name: 'Counter', line: 7, status: 'ok', export_ms: 12.5 }, 'Gate', { line: 3 }],
        version: 4,
    });
    assert.deepEqual(status, {
        state: 'ok',
        errors: 0,
        targets: [{ name: 'Counter', status: 'ok', exportMs: 12.5 }, { name: 'Gate' }],
    });
});

test('malformed answers are refused, not thrown on', () => {
    for (const raw of [null, undefined, 3, 'ok', [], { state: 'done' }, { errors: 2 }]) {
        assert.equal(parseStatus(raw), undefined);
    }
});

test('each state has its own text', () => {
    const view = (state: string, errors = 0) => describeStatus(parseStatus({ state, errors, targets: ['A'] })!);
    assert.match(view('exporting').text, /exporting/);
    assert.equal(view('ok').text, '$(check) exportlens');
    assert.equal(view('ok').command, 'exportlens.showGraph');
    assert.equal(view('error', 2).text, '$(error) exportlens: 2 errors');
    assert.equal(view('error', 1).text, '$(error) exportlens: 1 error');
    assert.equal(view('error', 2).tone, 'error');
    assert.match(view('idle').text, /idle/);
    assert.match(view('ok').tooltip, /Targets: A/);
});

test('a server that is not running says why in the tooltip', () => {
    const view = describeServerDown('exportlens is not installed in "python3".');
    assert.match(view.text, /not running/);
    assert.match(view.tooltip, /not installed in "python3"/);
    assert.equal(view.command, 'exportlens.showOutput');
});
