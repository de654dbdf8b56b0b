// The settings -> wire mapping (what the server receives as initializationOptions and
// on didChangeConfiguration).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
    DIAGNOSTIC_CODES,
    SERVER_DEFAULTS,
    ServerSettings,
    SettingValue,
    didChangeConfigurationParams,
    initializationOptions,
    needsRestart,
    toServerSettings,
} from '../../src/settings';

/** A reader over what the user set; keys absent are unset (explicit: false). */
function reader(set: Record<string, unknown>): (key: keyof ServerSettings) => SettingValue {
    return (key) => (key in set ? { value: set[key], explicit: true } : { value: undefined, explicit: false });
}

const ALL_NULL: ServerSettings = {
    debounceMs: null,
    timeout: null,
    memoryMb: null,
    workers: null,
    cacheDir: null,
    cacheUrl: null,
    cacheWrite: null,
    cache: null,
    strict: null,
    lower: null,
    weights: null,
    startMethod: null,
    diagnostics: null,
    inlayHints: null,
};

test('nothing set: every key present and null, so pyproject and server defaults apply', () => {
    const { settings, problems } = toServerSettings(reader({}));
    assert.deepEqual(settings, ALL_NULL);
    assert.deepEqual(problems, []);
});

test('a value equal to the editor default still counts when the user set it', () => {
    // Distinguishes "set timeout to 120 on purpose" (overrides pyproject) from "unset".
    const { settings } = toServerSettings(reader({ timeout: 120 }));
    assert.equal(settings.timeout, 120);
});

test('every setting is carried under its camelCase key', () => {
    const { settings, problems } = toServerSettings(
        reader({
            debounceMs: 50,
            timeout: 2.5,
            memoryMb: 1024,
            workers: 2,
            cacheDir: '/tmp/exportlens-cache',
            cacheUrl: 's3://team-bucket/exportlens',
            cacheWrite: true,
            cache: false,
            strict: true,
            lower: ['onnx'],
            weights: 'real',
            startMethod: 'spawn',
            diagnostics: { 'mutation/buffer': false, 'data-dependent': true },
            inlayHints: false,
        }),
    );
    assert.deepEqual(problems, []);
    assert.deepEqual(settings, {
        debounceMs: 50,
        timeout: 2.5,
        memoryMb: 1024,
        workers: 2,
        cacheDir: '/tmp/exportlens-cache',
        cacheUrl: 's3://team-bucket/exportlens',
        cacheWrite: true,
        cache: false,
        strict: true,
        lower: ['onnx'],
        weights: 'real',
        startMethod: 'spawn',
        diagnostics: { 'mutation/buffer': false, 'data-dependent': true },
        inlayHints: false,
    });
    assert.deepEqual(initializationOptions(settings, true), { exportlens: settings, trusted: true });
    assert.deepEqual(initializationOptions(settings, false), { exportlens: settings, trusted: false });
    assert.deepEqual(didChangeConfigurationParams(settings), { settings: { exportlens: settings } });
});

test('a list of codes means those codes are turned off', () => {
    const { settings, problems } = toServerSettings(reader({ diagnostics: ['mutation/buffer', 'timeout'] }));
    assert.deepEqual(settings.diagnostics, { 'mutation/buffer': false, timeout: false });
    assert.deepEqual(problems, []);
});

test('unknown codes and non-boolean switches are dropped with one message each', () => {
    const { settings, problems } = toServerSettings(
        reader({ diagnostics: { 'mutation/bufer': false, 'data-dependent': 'no', timeout: false } }),
    );
    assert.deepEqual(settings.diagnostics, { timeout: false });
    assert.equal(problems.length, 2);
    assert.match(problems[0], /unknown diagnostic code "mutation\/bufer"/);
    assert.match(problems[1], /diagnostics\.data-dependent: expected true or false/);
});

test('bad values fall back to the server default (null) and say which setting and why', () => {
    const { settings, problems } = toServerSettings(
        reader({ debounceMs: -5, timeout: 'slow', memoryMb: 10.5, workers: 0, cache: 'yes', strict: 1, lower: ['tflite'], weights: 'fake', startMethod: 'forkserver', cacheDir: 42, cacheUrl: 'http://x', cacheWrite: 'yes', diagnostics: 7, inlayHints: 'off' }),
    );
    assert.deepEqual(settings, ALL_NULL);
    const named = problems.map((p) => p.split(':')[0]);
    assert.deepEqual(named, [
        'exportlens.debounceMs',
        'exportlens.timeout',
        'exportlens.memoryMb',
        'exportlens.workers',
        'exportlens.cacheDir',
        'exportlens.cacheUrl',
        'exportlens.cacheWrite',
        'exportlens.cache',
        'exportlens.strict',
        'exportlens.lower',
        'exportlens.weights',
        'exportlens.startMethod',
        'exportlens.diagnostics',
        'exportlens.inlayHints',
    ]);
    assert.match(problems[0], /using the default 300/);
    assert.match(problems[10], /exportlens\.weights: expected "auto" or "real", got "fake"/);
    assert.match(problems[11], /exportlens\.startMethod: expected "auto", "fork", "spawn", got "forkserver"/);
    assert.match(problems[13], /exportlens\.inlayHints: expected true or false, got "off"; using the default true/);
});

test('cacheUrl "" turns the shared cache off (it reaches the server); null leaves it to $EXPORTLENS_CACHE_URL or pyproject', () => {
    assert.equal(toServerSettings(reader({ cacheUrl: '' })).settings.cacheUrl, '');
    assert.equal(toServerSettings(reader({ cacheUrl: null })).settings.cacheUrl, null);
    assert.equal(toServerSettings(reader({ cacheUrl: 'file:///mnt/team/exportlens' })).settings.cacheUrl, 'file:///mnt/team/exportlens');
});

test('cacheDir set to "" or null means the server default folder', () => {
    assert.equal(toServerSettings(reader({ cacheDir: '' })).settings.cacheDir, null);
    assert.equal(toServerSettings(reader({ cacheDir: null })).settings.cacheDir, null);
});

test('the code list matches the package.json schema', () => {
    // package.json lists each code as a property of exportlens.diagnostics; the two must not drift.
    const manifest = require('../../../package.json') as {
        contributes: { configuration: { properties: Record<string, { properties?: Record<string, unknown> }> } };
    };
    const schema = manifest.contributes.configuration.properties['exportlens.diagnostics'].properties ?? {};
    assert.deepEqual(Object.keys(schema).sort(), [...DIAGNOSTIC_CODES].sort());
});

test('the manifest declares every wire setting plus interpreter and trace, each with a scope and a description', () => {
    const manifest = require('../../../package.json') as {
        contributes: { configuration: { properties: Record<string, { scope?: string; markdownDescription?: string }> } };
    };
    const props = manifest.contributes.configuration.properties;
    const wire = Object.keys(ALL_NULL).map((k) => `exportlens.${k}`);
    for (const key of [...wire, 'exportlens.interpreter', 'exportlens.trace.server']) {
        assert.ok(props[key], `${key} is declared`);
        assert.ok(props[key].scope, `${key} has a scope`);
        assert.ok((props[key].markdownDescription ?? '').length > 20, `${key} has a description`);
    }
});

test('restart only for settings a running server cannot take', () => {
    const affects = (changed: string[]) => (section: string) => changed.some((c) => c === section || c.startsWith(`${section}.`));
    assert.equal(needsRestart(affects(['exportlens.interpreter'])), true);
    assert.equal(needsRestart(affects(['exportlens.workers'])), true);
    assert.equal(needsRestart(affects(['exportlens.timeout', 'exportlens.diagnostics'])), false);
    // Hints are switched in the running server, which asks the editor to refresh them.
    assert.equal(needsRestart(affects(['exportlens.inlayHints'])), false);
    assert.equal(needsRestart(affects(['python.defaultInterpreterPath'])), false);
});

test('lower: a list of known formats; [] turns lowering off over pyproject', () => {
    assert.deepEqual(toServerSettings(reader({ lower: ['onnx', 'onnx'] })).settings.lower, ['onnx']);
    assert.deepEqual(toServerSettings(reader({ lower: ['executorch', 'onnx'] })).settings.lower, ['executorch', 'onnx']);
    assert.deepEqual(toServerSettings(reader({ lower: [] })).settings.lower, []);
    const { settings, problems } = toServerSettings(reader({ lower: 'onnx' }));
    assert.equal(settings.lower, null);
    assert.match(problems[0], /exportlens\.lower: expected a list of formats \(onnx, executorch\)/);
});

test('inlayHints: true/false is sent as set; the manifest default is on, like the server\'s', () => {
    assert.equal(toServerSettings(reader({ inlayHints: false })).settings.inlayHints, false);
    assert.equal(toServerSettings(reader({ inlayHints: true })).settings.inlayHints, true);
    assert.equal(toServerSettings(reader({ inlayHints: null })).settings.inlayHints, null);
    const manifest = require('../../../package.json') as {
        contributes: { configuration: { properties: Record<string, { type?: unknown; default?: unknown }> } };
    };
    const prop = manifest.contributes.configuration.properties['exportlens.inlayHints'];
    assert.equal(prop.type, 'boolean');
    assert.equal(prop.default, SERVER_DEFAULTS.inlayHints);
});
