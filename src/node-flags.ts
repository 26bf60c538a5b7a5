/**
 * The V8 flags a coordinator process runs with, wherever it is started as deployed: `npm start`
 * (package.json), the container image (Dockerfile `CMD`) and the benchmarks' coordinators
 * (bench/support.ts). test/unit/deployment-files.test.ts checks that the first two say the same.
 *
 * `--max-semi-space-size=64` (MiB; Node 20's default is 16): a young generation of up to
 * 2 × 64 MiB, which V8 grows to as bytes survive its collections (in the benchmarks a one-group
 * replica stayed small; one running for hours may reach the maximum). Measured on replicas
 * holding many groups (why their young-generation GCs cost so much more than with one group was
 * not established): at 2,000 groups, with the default size they came every ~1,000 heartbeats and
 * took 8–11 ms each (8–12 µs per heartbeat); with 32 MiB, about 2 ms, two to three times less
 * often. At 10,000 groups (docs/BENCHMARKS.md, capacity, 2026-11-26, one machine): 16 MiB (one
 * run), 8–10.9 ms each, 8–9 µs per heartbeat, RSS 1,064 MiB; 32 MiB (five runs), 2.3–3.3 ms,
 * 17–23 per 3 s round, RSS 795–1,058 MiB; 64 MiB (six runs), about the same (2.5–4.3 ms) half
 * as often, RSS 588–826 MiB (less of the build promoted to the old generation before it died),
 * the heartbeat rate unchanged within the noise. The price: up to 96 MiB more resident memory
 * than Node's default (2 × 48 MiB) where the young generation grows to its maximum.
 */
export const COORDINATOR_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=64'];
