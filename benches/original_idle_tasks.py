"""The original's figure for the many_tasks bench: the memory one more idle task costs.
N tasks, then M in all, each with an environment of its own (as every task has in
hermes-tools), run `true` three times through hermes-agent's terminal tool (local
backend) and are left idle. Prints, on its last line, the proportional set size (KiB) of
this process and every process below it: after one warm-up task, with the N tasks idle,
then with the M.
HERMES_HOME and TERMINAL_CWD come from the bench."""

import os
import sys
import time

from tools.terminal_tool import cleanup_all_environments, register_task_env_overrides, terminal_tool


def tree_pss_kib(root):
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        parent = int(stat[stat.rfind(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(name))
    pids, total = [root], 0
    while pids:
        pid = pids.pop()
        pids.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += sum(int(l.split()[1]) for l in f if l.startswith("Pss:"))
        except OSError:
            pass
    return total


counts = [int(count) for count in sys.argv[1:]]
terminal_tool("true", task_id="bench-idle-warm")
time.sleep(1)
figures = [tree_pss_kib(os.getpid())]
done = 0
for count in counts:
    for i in range(done, count):
        register_task_env_overrides(f"bench-idle-{i}", {"env_type": "local"})
    for _ in range(3):
        for i in range(done, count):
            terminal_tool("true", task_id=f"bench-idle-{i}")
    done = count
    time.sleep(2)
    figures.append(tree_pss_kib(os.getpid()))
cleanup_all_environments()
print(" ".join(str(figure) for figure in figures))
