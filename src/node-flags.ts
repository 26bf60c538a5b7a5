/**
 * The V8 flags a coordinator process runs with, wherever it is started as deployed: `npm start`
 * (package.json), the container image (Dockerfile `CMD`) and the benchmarks' coordinators
 * (bench/support.ts). test/unit/deployment-files.test.ts checks that the first two say the same.
 *
 * `--max-semi-space-size=32` (MiB; Node 20's default is 16): a young generation of up to
 * 2 × 32 MiB. Measured on a replica holding 2,000 groups (why its young-generation GCs cost so
 * much more than with one group was not established): with the default size they came every
 * ~1,000 heartbeats and took 8–11 ms each (8–12 µs per heartbeat, against 1–2 µs with one
 * group); with 32 MiB they come two to three times less often and take about 2 ms, about 1 µs
 * per heartbeat (docs/BENCHMARKS.md, capacity).
 * The price is up to 32 MiB more resident memory.
 */
export const COORDINATOR_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32'];
