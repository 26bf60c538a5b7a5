import { parseArgs } from 'node:util';
import { loadSettings, SettingsError } from './config/load.js';
import { createLogger } from './observability/logger.js';
import { startCoordinator } from './server.js';

/** Boot: settings → coordinator → signal handling. The only place that calls process.exit. */
async function main(): Promise<void> {
  const { values } = parseArgs({ options: { config: { type: 'string' } }, strict: false });
  let settings;
  try {
    settings = loadSettings({
      configFile: typeof values.config === 'string' ? values.config : undefined,
    });
  } catch (error) {
    if (error instanceof SettingsError) {
      process.stderr.write(`stream-coordinator: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger({ level: settings.log.level, format: settings.log.format });
  const starting = startCoordinator(settings, {
    logger,
    onBootstrapPassword: (password) => {
      process.stdout.write(
        `\n  Bootstrap admin user created (embedded mode).\n  username: admin\n  password: ${password}\n` +
          `  (shown once; set COORDINATOR_SECURITY_BOOTSTRAP_ADMIN_PASSWORD to choose it)\n\n`,
      );
    },
  });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info(`${signal}: shutting down`);
    // The bound: groups are handed over within SHUTDOWN_HANDOVER_MS, the rest must not hang.
    setTimeout(() => {
      logger.error('shutdown took longer than 5 s: exiting');
      process.exit(1);
    }, 5_000).unref();
    // A signal while starting (registered, leases being taken) waits for the start to end, then
    // hands over as any stop does: Node's default would end the process with nothing handed over.
    starting
      .then((coordinator) => coordinator.close())
      .then(
        () => process.exit(0),
        (error: unknown) => {
          logger.error('shutdown failed', { error: String(error) });
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  await starting;
}

main().catch((error: unknown) => {
  process.stderr.write(
    `stream-coordinator: failed to start: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exit(1);
});
