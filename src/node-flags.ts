/**
 * The V8 flags a coordinator process runs with, wherever it is started as deployed: `npm start`
 * (package.json), the container image (Dockerfile `CMD`) and the benchmarks' coordinators
 * (bench/support.ts). test/unit/deployment-files.test.ts checks that the first two say the same.
 *
 * `--max-semi-space-size=32` (MiB; Node 20's default is 16): a young generation of up to
 * 2 × 32 MiB. A replica holding many groups keeps a large old generation, and each young-generation
 * GC also visits the references from it into the young objects; with the default size those GCs
 * came every ~1,000 heartbeats and took 8–11 ms each at 2,000 groups (8–12 µs per heartbeat,
 * against 1–2 µs for a replica with one group). With 32 MiB they come about three times less
 * often and take about 2 ms: GC fell to about 1 µs per heartbeat (docs/BENCHMARKS.md, capacity).
 * The price is up to 32 MiB more resident memory.
 */
export const COORDINATOR_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32'];
