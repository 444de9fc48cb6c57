import { Client, StreamableHTTPClientTransport, type ElicitRequest } from '@modelcontextprotocol/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { humanText, MAX_ASK_CHARS } from '../../src/domain/human-text.js';
import { grant } from '../helpers/actions.js';
import { client, type Client as Api } from '../helpers/api.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { errorEnvelope, MODERN, toolName, type Era } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';

/**
 * Text shown to a human who decides (docs/owners/approvals.md "What you see when you decide"): the
 * MCP confirmation ask, over the official client in both eras, shows the hidden characters an
 * agent put in its arguments as visible markers and is capped with a count of what was cut.
 * (The console inbox: test/console/console-inbox.test.ts.)
 */

let api: Api;
let owner: string;
let agent: { token: string; principal: string };
let tool: string;

/** A right-to-left override, zero-width characters, a BOM and a tag character. */
const HIDDEN = 'unlock\u202E\u200B\u200C\u200D\uFEFF\u2066\u{E0041}door';

const server = useTestServer();

beforeAll(async () => {
  api = client(server.url);
  owner = await server.ownerToken('owner-human-text');
  const device = await attachDevice(api, owner, {
    name: 'Front door',
    manifest: {
      capabilities: [
        {
          name: 'say',
          kind: 'control',
          arguments: { type: 'object', properties: { text: { type: 'string', maxLength: 8000 } }, required: ['text'], additionalProperties: false },
        },
      ],
    },
  });
  agent = await createAgent(api, owner, { name: 'speaker', principal: 'agent:speaker' });
  await grant(api, owner, agent.principal, device.id, ['say'], undefined, 'user');
  tool = toolName('say', device.id);
});

/** Calls the tool as the official client in `era` that answers every ask with `answer`: what the user was asked, and the result. */
async function callAsking(era: Era, text: string, answer: { action: 'accept' | 'decline'; content?: { confirm: boolean } }) {
  const asked: ElicitRequest['params'][] = [];
  const mcp = new Client(
    { name: 'human-text-tests', version: '1.0.0' },
    { ...(era === 'modern' ? { versionNegotiation: { mode: { pin: MODERN } } } : {}), capabilities: { elicitation: { form: {} } } },
  );
  mcp.setRequestHandler('elicitation/create', (request) => {
    asked.push(request.params);
    return answer;
  });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${agent.token}` } } }));
  const result: any = await mcp.callTool({ name: tool, arguments: { text } });
  await mcp.close();
  return { asked, result };
}

/** The message the user was asked, declining it. */
async function askedMessage(era: Era, text: string): Promise<string> {
  const { asked, result } = await callAsking(era, text, { action: 'decline' });
  expect(result.isError).toBe(true);
  expect(asked).toHaveLength(1);
  return asked[0]!.message;
}

describe.each(['modern', 'legacy'] as const)('the MCP confirmation ask over the official %s client', (era) => {
  it('shows each bidi control, zero-width character and tag character as a visible marker', async () => {
    const message = await askedMessage(era, HIDDEN);
    expect(message).toContain('unlock⟨U+202E⟩⟨U+200B⟩⟨U+200C⟩⟨U+200D⟩⟨U+FEFF⟩⟨U+2066⟩⟨U+E0041⟩door');
    expect(message).not.toMatch(/[\u202E\u200B-\u200D\uFEFF\u2066]|\u{E0041}/u);
  });

  it(`is not made when it would be longer than ${MAX_ASK_CHARS} characters: the user would not see all that runs`, async () => {
    // Harmless-looking padding first, what matters past where a cut would fall.
    const { asked, result } = await callAsking(era, `${'please '.repeat(200)}and unlock the door`, { action: 'accept', content: { confirm: true } });
    expect(asked).toHaveLength(0);
    expect(result.isError).toBe(true);
    const { error } = errorEnvelope(result);
    expect(error.code).toBe('confirmation_required');
    expect(error.message).toContain(`a confirmation shows at most ${MAX_ASK_CHARS}`);
    expect(error.message).toContain('Nothing was queued');
  });
});

describe('marking and capping', () => {
  it('marks bidi controls, invisible characters and controls other than tab and newline, and nothing else', () => {
    const hidden = [
      '\u202A',
      '\u202E',
      '\u2066',
      '\u2069',
      '\u200E',
      '\u200F',
      '\u061C',
      '\u200B',
      '\u200D',
      '\u2060',
      '\u2064',
      '\uFEFF',
      '\u180E',
      '\u{E0001}',
      '\u{E007F}',
      '\u00AD',
      '\u0007',
      '\u2028',
    ];
    for (const char of hidden) expect(humanText(`a${char}b`, 10)).toBe(`a⟨U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}⟩b`);
    expect(humanText('Grüße, שלום, 日本\t\n"x"', 100)).toBe('Grüße, שלום, 日本\t\n"x"');
  });

  it('counts characters, not UTF-16 units, and says how many were cut', () => {
    expect(humanText('😀'.repeat(3), 2)).toBe('😀😀… (1 more character)');
    expect(humanText('abc', 3)).toBe('abc');
  });
});
