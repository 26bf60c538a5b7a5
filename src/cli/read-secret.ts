import { createInterface } from 'node:readline';

/** Reads one line from stdin; on a terminal the typed characters are not echoed. */
export async function readSecret(prompt: string): Promise<string> {
  const input = process.stdin;
  if (!input.isTTY) {
    const chunks: Buffer[] = [];
    for await (const chunk of input) chunks.push(Buffer.from(chunk as Buffer));
    return Buffer.concat(chunks)
      .toString('utf8')
      .replace(/\r?\n$/, '');
  }
  const rl = createInterface({ input, output: process.stderr, terminal: true });
  const rlOutput = rl as unknown as { _writeToOutput: (s: string) => void };
  process.stderr.write(prompt);
  rlOutput._writeToOutput = () => undefined;
  const answer = await new Promise<string>((resolve) => rl.question('', resolve));
  rl.close();
  process.stderr.write('\n');
  return answer;
}
