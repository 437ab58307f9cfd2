/** A process to start: no shell lookup beyond env.PATH, no inherited environment. */
export interface LaunchSpec {
  file: string;
  args: readonly string[];
  cwd: string;
  env: Record<string, string>;
  /**
   * Own process group: a kill reaches its background children too, and they are killed when the
   * leader exits.
   */
  group: boolean;
  /** Written to stdin, which is then closed; without it stdin is /dev/null. */
  input?: string;
}

export type LauncherRequest =
  | { type: "launch"; id: number; spec: LaunchSpec }
  | { type: "kill"; id: number; signal: NodeJS.Signals };

export type LauncherReply =
  | { type: "output"; id: number; stream: 1 | 2; chunk: Uint8Array }
  | { type: "exited"; id: number; code: number | null; signal: NodeJS.Signals | null }
  | { type: "failed"; id: number; code?: string; message: string };
