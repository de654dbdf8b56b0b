// Reads the `exportlens` section from VS Code and hands it to the pure mapping in
// settings.ts. The server serves the whole window, so settings are read for the first
// workspace folder (folder-level values there win over workspace and user values).
import * as os from 'os';
import { Uri, workspace } from 'vscode';
import { MappedSettings, SettingValue, ServerSettings, toServerSettings } from './settings';

export const SECTION = 'exportlens';

export function firstFolder(): Uri | undefined {
    return workspace.workspaceFolders?.[0]?.uri;
}

export function readServerSettings(): MappedSettings {
    const config = workspace.getConfiguration(SECTION, firstFolder());
    return toServerSettings((key: keyof ServerSettings): SettingValue => {
        const seen = config.inspect(key);
        const explicit =
            seen?.globalValue !== undefined ||
            seen?.workspaceValue !== undefined ||
            seen?.workspaceFolderValue !== undefined;
        return { value: config.get(key), explicit };
    });
}

export function readInterpreterSetting(): string | undefined {
    return workspace.getConfiguration(SECTION, firstFolder()).get<string>('interpreter');
}

export function homeDir(): string {
    return os.homedir();
}
