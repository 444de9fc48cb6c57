import http from 'node:http';

/**
 * A counting HTTP proxy in front of sqld, for the measuring scripts: every Hrana-over-HTTP
 * pipeline request the service sends is one network round trip to the database, and each
 * `execute` in it (or each step of a `batch`) one statement. `scripts/roundtrips.ts
 * --database sqld` reads the counters between the requests it makes, so it can say how many
 * round trips and statements each REST or MCP request costs on a libSQL server.
 */
export interface SqldCounter {
  /** `http://127.0.0.1:PORT`, to use as DATABASE_URL instead of sqld's own. */
  url: string;
  counts(): { roundTrips: number; statements: number };
  close(): Promise<void>;
}

interface PipelineBody {
  requests?: { type: string; batch?: { steps?: unknown[] } }[];
}

export async function startSqldCounter(target: string): Promise<SqldCounter> {
  let roundTrips = 0;
  let statements = 0;
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.url?.endsWith('/pipeline')) {
        roundTrips++;
        const parsed = JSON.parse(body.toString()) as PipelineBody;
        for (const request of parsed.requests ?? []) {
          if (request.type === 'execute') statements++;
          if (request.type === 'batch') statements += request.batch?.steps?.length ?? 0;
        }
      }
      const upstream = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers, agent }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      upstream.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    counts: () => ({ roundTrips, statements }),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      agent.destroy();
    },
  };
}
