// Every command the manifest contributes is registered by the extension itself, so the
// language client must not register the server's command of the same id (it fails on
// the duplicate): OWN_COMMANDS must list them all, the code lens commands included.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OWN_COMMANDS } from '../../src/commandIds';

test('OWN_COMMANDS is exactly the manifest\'s commands, lens commands included', () => {
    const manifest = require('../../../package.json') as { contributes: { commands: Array<{ command: string }> } };
    const contributed = manifest.contributes.commands.map((c) => c.command).sort();
    assert.deepEqual([...OWN_COMMANDS].sort(), contributed);
    // The server's code lenses run these two: a click must reach the extension's handler.
    assert.ok(OWN_COMMANDS.has('exportlens.reexport'));
    assert.ok(OWN_COMMANDS.has('exportlens.graph'));
});
