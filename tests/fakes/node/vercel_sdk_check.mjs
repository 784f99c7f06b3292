// Vercel's official Sandbox SDK (npm @vercel/sandbox) against the fake in
// ../vercel_api.py: if the fake drifts from the API the SDK speaks, this fails.
//
//   node vercel_sdk_check.mjs FAKE_URL TOKEN TEAM_ID PROJECT_ID    # prints "sdk ok"
import { Sandbox } from "@vercel/sandbox";

const [fakeUrl, token, teamId, projectId] = process.argv.slice(2);
// The SDK always talks to https://vercel.com/api; its `fetch` option is the documented
// way to put something else underneath.
const fetchToFake = (url, init) => globalThis.fetch(String(url).replace("https://vercel.com/api", `${fakeUrl}/api`), init);

function expect(condition, what) {
  if (!condition) {
    console.error(`SDK check failed: ${what}`);
    process.exit(1);
  }
}

const sandbox = await Sandbox.create({ token, teamId, projectId, runtime: "node22", resources: { vcpus: 2 }, timeout: 600000, fetch: fetchToFake });
let result = await sandbox.runCommand("bash", ["-c", "echo from-sdk; echo to-stderr >&2; exit 3"]);
expect(result.exitCode === 3, `exit code ${result.exitCode}`);
expect((await result.stdout()) === "from-sdk\n", `stdout ${JSON.stringify(await result.stdout())}`);
expect((await result.stderr()) === "to-stderr\n", `stderr ${JSON.stringify(await result.stderr())}`);

result = await sandbox.runCommand({ cmd: "bash", args: ["-c", "pwd; echo $GREETING"], cwd: "/tmp", env: { GREETING: "hi" } });
expect((await result.stdout()) === "/tmp\nhi\n", `cwd/env ${JSON.stringify(await result.stdout())}`);

const detached = await sandbox.runCommand({ cmd: "bash", args: ["-c", "echo started; sleep 60"], detached: true });
await detached.kill("SIGKILL");
const killed = await detached.wait();
expect(killed.exitCode !== 0, `killed command exit code ${killed.exitCode}`);

const logged = await sandbox.runCommand({ cmd: "bash", args: ["-c", "echo a; echo b >&2"], detached: true });
const lines = [];
for await (const line of logged.logs()) lines.push(`${line.stream}:${line.data}`);
// Two pipes: their relative order is not defined.
expect(lines.sort().join("") === "stderr:b\nstdout:a\n", `logs ${JSON.stringify(lines)}`);

await sandbox.runCommand("bash", ["-c", "printf content > /tmp/sdk-file"]);
const file = await sandbox.readFileToBuffer({ path: "/tmp/sdk-file" });
expect(file && file.toString() === "content", `readFile ${file}`);
expect((await sandbox.readFileToBuffer({ path: "/tmp/missing" })) === null, "a missing file reads as null");

await sandbox.stop();
console.log("sdk ok");
