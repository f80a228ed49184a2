// The e2e clients' test runner: tests registered with test(name, fn) run in order, one line each
// (ok or FAIL with the stack), then the count; the process exits 1 when any failed.
const tests = [];

export const test = (name, fn) => tests.push([name, fn]);

export async function runTests() {
  let failures = 0;
  for (const [name, fn] of tests) {
    const t0 = Date.now();
    try {
      await fn();
      console.log(`ok   ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      ++failures;
      console.log(`FAIL ${name}: ${e.stack ?? e}`);
    }
  }
  console.log(`${tests.length - failures}/${tests.length} passed`);
  process.exit(failures ? 1 : 0);
}
