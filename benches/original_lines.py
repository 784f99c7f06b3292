"""The original behind the same pipe as `hermes-tools serve`, for benches/original.rs:
one call per input line in the OpenAI shape (`id`, `function.name`, `function.arguments`
as a JSON string, optional `task_id`), dispatched by hermes-agent's own
`model_tools.handle_function_call`, answered by one line `{"role": "tool",
"tool_call_id", "content"}`. HERMES_HOME and TERMINAL_CWD come from the bench."""

import json
import sys

from model_tools import handle_function_call

for line in sys.stdin:
    call = json.loads(line)
    function = call["function"]
    content = handle_function_call(
        function["name"],
        json.loads(function.get("arguments") or "{}"),
        task_id=call.get("task_id"),
        tool_call_id=call["id"],
    )
    sys.stdout.write(json.dumps({"role": "tool", "tool_call_id": call["id"], "content": content}) + "\n")
    sys.stdout.flush()
