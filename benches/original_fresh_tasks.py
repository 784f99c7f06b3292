"""The original's figure for the terminal bench: N fresh tasks, each running `sleep 1`
at the same moment through hermes-agent's terminal tool (local backend). Prints the
wall time in seconds on the last line. HERMES_HOME and TERMINAL_CWD come from the bench.

`shared`: the original's default, where every task id is mapped onto one environment
(the one the warm-up call created). `isolated`: each task gets an environment of its
own (an override with `env_type`, as its benchmark harnesses register), as every task
does in hermes-tools."""

import json
import sys
import threading
import time

from tools.terminal_tool import cleanup_all_environments, register_task_env_overrides, terminal_tool

count = int(sys.argv[1])
isolated = sys.argv[2] == "isolated"
# One call first, so the imports and one-time set-up stay out of the figure.
terminal_tool("true", task_id="bench-fresh-warm")
if isolated:
    for i in range(count):
        register_task_env_overrides(f"bench-fresh-{i}", {"env_type": "local"})
codes = [None] * count


def run(i):
    codes[i] = json.loads(terminal_tool("sleep 1", task_id=f"bench-fresh-{i}"))["exit_code"]


threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
started = time.monotonic()
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
elapsed = time.monotonic() - started
cleanup_all_environments()
if set(codes) != {0}:
    sys.exit(f"exit codes {set(codes)}")
print(f"{elapsed:.4f}")
