// batonpass's completion hook for pi, installed by `baton hooks install --agent pi` into pi's extensions
// folder (docs/agents.md, pi). When a run of the agent ends (`agent_end`; on pi 1.x also `agent_settled`,
// once pi will not retry or go on by itself) it hands the session's id and file to batonpass's hook spool:
// it runs BATON_COMMAND with that JSON on stdin, in the background, and never waits for it or fails.
// The spool command reads $TMUX_PANE from pi's environment. The answer itself is read from the session file.
import { spawn } from "node:child_process";

const BATON_COMMAND: string[] = [];  // written by `baton hooks install --agent pi`

function spool(event: string, ctx: any): void {
  const sessions = ctx?.sessionManager;
  const payload = {
    hook_event_name: event,
    session_id: sessions?.getSessionId?.() ?? null,
    session_file: sessions?.getSessionFile?.() ?? null,
    leaf_id: sessions?.getLeafId?.() ?? null,
    cwd: ctx?.cwd ?? sessions?.getCwd?.() ?? null,
  };
  try {
    const child = spawn(BATON_COMMAND[0], BATON_COMMAND.slice(1), { stdio: ["pipe", "ignore", "ignore"] });
    child.on("error", () => {});
    child.stdin?.on("error", () => {});
    child.stdin?.end(JSON.stringify(payload));
    child.unref();
  } catch {
    // batonpass not installed where it was: pi goes on as if no hook were there
  }
}

export default function (pi: any): void {
  pi.on("agent_end", async (_event: unknown, ctx: unknown) => spool("agent_end", ctx));
  pi.on("agent_settled", async (_event: unknown, ctx: unknown) => spool("agent_settled", ctx));
}
