// The `exportlens.*` settings as the server receives them. Pure: no `vscode` import,
// so the mapping is unit-tested with plain Node.
//
// The same object goes out as `initializationOptions.exportlens` (beside `trusted`, VS
// Code's Workspace Trust) and as
// `workspace/didChangeConfiguration` `settings.exportlens`. Every key is always present;
// `null` means "the user did not set this": the server then takes the value from the
// project's `[tool.exportlens]` (timeout, memory, strict, lower, weights, start method) or its own default. Sending the
// editor's defaults as if set would silently override every project's pyproject.

/** The diagnostic codes (docs/contract.md, docs/diagnostics.md), for checking the `diagnostics` setting. */
export const DIAGNOSTIC_CODES: readonly string[] = [
    'syntax-error',
    'import-error',
    'target-error',
    'eager-error',
    'data-dependent',
    'constraint-violation',
    'unsupported',
    'unsupported-type',
    'export-error',
    'banned-mutation/input-metadata',
    'banned-mutation/parameter',
    'banned-mutation/tensor-attribute',
    'mutation/buffer',
    'mutation/user-input',
    'mutation/parameter',
    'unknown-input-kind',
    'unknown-output-kind',
    'timeout',
    'worker-crash',
    'out-of-memory',
    'training-mode',
    'lowering/onnx-unsupported',
    'lowering/onnx-error',
    'lowering/onnx-mismatch',
    'lowering/executorch-error',
    'lowering/executorch-missing-kernel',
    'lowering/executorch-mismatch',
    'lowering/executorch-not-delegated',
    'lowering/executorch-memory',
    'lowering/executorch-over-budget',
];

/** The formats a target can be lowered to (the `lower` setting, `[tool.exportlens] lower`). */
export const LOWER_FORMATS: readonly string[] = ['onnx', 'executorch'];

/** How models are built (the `weights` setting, `[tool.exportlens] weights`). */
export const WEIGHTS_CHOICES: readonly string[] = ['auto', 'real'];

/** How the workers start each export process (the `startMethod` setting, `[tool.exportlens] start_method`). */
export const START_METHOD_CHOICES: readonly string[] = ['auto', 'fork', 'spawn'];

/** The wire object: camelCase keys, `null` = not set by the user. */
export interface ServerSettings {
    debounceMs: number | null;
    timeout: number | null; // seconds per target
    memoryMb: number | null;
    workers: number | null;
    cacheDir: string | null; // null also when set to null/"" (the server's default folder)
    cacheUrl: string | null; // the shared cache (s3://bucket/prefix...); "" none; null: $EXPORTLENS_CACHE_URL or pyproject's
    cacheWrite: boolean | null; // upload results to the shared cache (the editor's own choice, never pyproject's)
    cache: boolean | null;
    strict: boolean | null;
    lower: string[] | null; // [] lowers nothing, whatever pyproject says
    weights: string | null; // "auto" (fake where no step needs values) or "real"
    startMethod: string | null; // "auto", "fork" (Linux's default) or "spawn" (macOS's and Windows')
    diagnostics: Record<string, boolean> | null; // code -> shown
    inlayHints: boolean | null; // dtype/shape hints after each line of forward
}

/** The effective values the server falls back to, mirrored for documentation and tests. */
export const SERVER_DEFAULTS = {
    debounceMs: 300,
    timeout: 120,
    memoryMb: 8192,
    workers: 1,
    cacheDir: null,
    cacheUrl: null,
    cacheWrite: false,
    cache: true,
    strict: false,
    lower: [],
    weights: 'auto',
    startMethod: 'auto',
    diagnostics: {},
    inlayHints: true,
} as const;

/** One setting as the editor reports it: its value and whether the user set it anywhere. */
export interface SettingValue {
    value: unknown;
    explicit: boolean;
}

/** Reads one key of the `exportlens` section (`debounceMs`, `diagnostics`, ...). */
export type SettingReader = (key: keyof ServerSettings) => SettingValue;

export interface MappedSettings {
    settings: ServerSettings;
    /** One message per bad value; the value is sent as null (server default) instead. */
    problems: string[];
}

interface NumberRule {
    min: number;
    max: number;
    integer: boolean;
}

// Same bounds as the package.json schema and the server's parser: a value the
// schema would flag never reaches the server.
const NUMBER_RULES: Record<'debounceMs' | 'timeout' | 'memoryMb' | 'workers', NumberRule> = {
    debounceMs: { min: 0, max: 60_000, integer: true },
    timeout: { min: 0.1, max: 86_400, integer: false },
    memoryMb: { min: 64, max: 1 << 22, integer: true },
    workers: { min: 1, max: 64, integer: true },
};

function numberSetting(key: keyof typeof NUMBER_RULES, value: unknown, problems: string[]): number | null {
    const rule = NUMBER_RULES[key];
    const ok =
        typeof value === 'number' &&
        Number.isFinite(value) &&
        (!rule.integer || Number.isInteger(value)) &&
        value >= rule.min &&
        value <= rule.max;
    if (ok) {
        return value;
    }
    const kind = rule.integer ? 'a whole number' : 'a number';
    problems.push(
        `exportlens.${key}: expected ${kind} from ${rule.min} to ${rule.max}, got ${JSON.stringify(value)}; ` +
            `using the default ${SERVER_DEFAULTS[key]}`,
    );
    return null;
}

function booleanSetting(key: 'cache' | 'cacheWrite' | 'strict' | 'inlayHints', value: unknown, problems: string[]): boolean | null {
    if (typeof value === 'boolean') {
        return value;
    }
    problems.push(
        `exportlens.${key}: expected true or false, got ${JSON.stringify(value)}; using the default ${SERVER_DEFAULTS[key]}`,
    );
    return null;
}

function lowerSetting(value: unknown, problems: string[]): string[] | null {
    if (Array.isArray(value) && value.every((v) => typeof v === 'string' && LOWER_FORMATS.includes(v))) {
        return [...new Set(value as string[])];
    }
    problems.push(
        `exportlens.lower: expected a list of formats (${LOWER_FORMATS.join(', ')}), got ${JSON.stringify(value)}; ` +
            `using the project's [tool.exportlens] lower, else none`,
    );
    return null;
}

function weightsSetting(value: unknown, problems: string[]): string | null {
    if (typeof value === 'string' && WEIGHTS_CHOICES.includes(value)) {
        return value;
    }
    problems.push(
        `exportlens.weights: expected ${WEIGHTS_CHOICES.map((w) => JSON.stringify(w)).join(' or ')}, got ${JSON.stringify(value)}; ` +
            `using the project's [tool.exportlens] weights, else "auto"`,
    );
    return null;
}

function cacheUrlSetting(value: unknown, problems: string[]): string | null {
    if (typeof value === 'string' && (value === '' || /^(s3|s3a|gs|az|azure|abfs|abfss|file):\/\/./.test(value))) {
        return value;
    }
    problems.push(`exportlens.cacheUrl: expected s3://, gs://, az:// or file:// followed by a bucket or folder, or "", got ${JSON.stringify(value)}; using the default`);
    return null;
}

function startMethodSetting(value: unknown, problems: string[]): string | null {
    if (typeof value === 'string' && START_METHOD_CHOICES.includes(value)) {
        return value;
    }
    problems.push(
        `exportlens.startMethod: expected ${START_METHOD_CHOICES.map((w) => JSON.stringify(w)).join(', ')}, got ${JSON.stringify(value)}; ` +
            `using $EXPORTLENS_START_METHOD, the project's [tool.exportlens] start_method, else "auto"`,
    );
    return null;
}

function cacheDirSetting(value: unknown, problems: string[]): string | null {
    if (value === null || value === undefined || value === '') {
        return null;
    }
    if (typeof value === 'string') {
        return value;
    }
    problems.push(`exportlens.cacheDir: expected a folder path or null, got ${JSON.stringify(value)}; using the default`);
    return null;
}

/**
 * `{"mutation/buffer": false}` or `["mutation/buffer"]` (codes to turn off) as a map of
 * code -> shown. Unknown codes and non-boolean values are dropped with a message.
 */
export function diagnosticsSetting(value: unknown, problems: string[]): Record<string, boolean> | null {
    let pairs: Array<[unknown, unknown]>;
    if (Array.isArray(value)) {
        pairs = value.map((code) => [code, false]);
    } else if (value !== null && typeof value === 'object') {
        pairs = Object.entries(value as Record<string, unknown>);
    } else {
        problems.push(
            `exportlens.diagnostics: expected a map of code to true/false or a list of codes to turn off, ` +
                `got ${JSON.stringify(value)}; all codes stay on`,
        );
        return null;
    }
    const known = new Set(DIAGNOSTIC_CODES);
    const out: Record<string, boolean> = {};
    for (const [code, shown] of pairs) {
        if (typeof code !== 'string' || !known.has(code)) {
            problems.push(`exportlens.diagnostics: unknown diagnostic code ${JSON.stringify(code)} (ignored)`);
        } else if (typeof shown !== 'boolean') {
            problems.push(`exportlens.diagnostics.${code}: expected true or false, got ${JSON.stringify(shown)}; it stays on`);
        } else {
            out[code] = shown;
        }
    }
    return out;
}

/** The wire settings from the editor's values; bad values become null plus a problem. */
export function toServerSettings(read: SettingReader): MappedSettings {
    const problems: string[] = [];
    const pick = <T>(key: keyof ServerSettings, convert: (value: unknown) => T | null): T | null => {
        const { value, explicit } = read(key);
        // Unset, or set to null (the schema's "use the default"): let the server decide.
        if (!explicit || value === null || value === undefined) {
            return null;
        }
        return convert(value);
    };
    const settings: ServerSettings = {
        debounceMs: pick('debounceMs', (v) => numberSetting('debounceMs', v, problems)),
        timeout: pick('timeout', (v) => numberSetting('timeout', v, problems)),
        memoryMb: pick('memoryMb', (v) => numberSetting('memoryMb', v, problems)),
        workers: pick('workers', (v) => numberSetting('workers', v, problems)),
        cacheDir: pick('cacheDir', (v) => cacheDirSetting(v, problems)),
        cacheUrl: pick('cacheUrl', (v) => cacheUrlSetting(v, problems)),
        cacheWrite: pick('cacheWrite', (v) => booleanSetting('cacheWrite', v, problems)),
        cache: pick('cache', (v) => booleanSetting('cache', v, problems)),
        strict: pick('strict', (v) => booleanSetting('strict', v, problems)),
        lower: pick('lower', (v) => lowerSetting(v, problems)),
        weights: pick('weights', (v) => weightsSetting(v, problems)),
        startMethod: pick('startMethod', (v) => startMethodSetting(v, problems)),
        diagnostics: pick('diagnostics', (v) => diagnosticsSetting(v, problems)),
        inlayHints: pick('inlayHints', (v) => booleanSetting('inlayHints', v, problems)),
    };
    return { settings, problems };
}

/**
 * `initializationOptions` of the `initialize` request. `trusted` is VS Code's Workspace
 * Trust (`workspace.isTrusted`): the server runs no code of a folder its user has not
 * trusted, and VS Code has asked already (the extension does not run in Restricted
 * Mode), so it passes the answer instead of the server asking a second time.
 */
export function initializationOptions(settings: ServerSettings, trusted: boolean): { exportlens: ServerSettings; trusted: boolean } {
    return { exportlens: settings, trusted };
}

/** `params` of `workspace/didChangeConfiguration`. */
export function didChangeConfigurationParams(settings: ServerSettings): { settings: { exportlens: ServerSettings } } {
    return { settings: { exportlens: settings } };
}

/**
 * Settings that only take effect in a new server process: the interpreter is the
 * process itself, and the worker count sizes the warm pool when it starts. The rest
 * (limits, cache, strict, diagnostics) reach the running server through
 * didChangeConfiguration and apply to the next export; `inlayHints` at once (the
 * server asks the editor to refresh its hints).
 */
export const RESTART_SETTINGS: readonly string[] = ['exportlens.interpreter', 'exportlens.workers'];

/** Whether a configuration change (VS Code's `affectsConfiguration`) needs a restart. */
export function needsRestart(affects: (section: string) => boolean): boolean {
    return RESTART_SETTINGS.some((section) => affects(section));
}
