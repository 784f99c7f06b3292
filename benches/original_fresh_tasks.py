"""The original's figure for the terminal bench: N fresh tasks, each running `sleep 1`
at the same moment through hermes-agent's terminal tool (local backend). Prints the
wall time in seconds on the last line. HERMES_HOME and TERMINAL_CWD come from the bench."""

import json
import sys
import threading
import time

from tools.terminal_tool import cleanup_all_environments, terminal_tool

count = int(sys.argv[1])
# One call first, so the imports and one-time set-up stay out of the figure.
terminal_tool("true", task_id="bench-fresh-warm")
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
