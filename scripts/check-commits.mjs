// `npm run check:commits`: every commit subject (a commit message's first line) is at most 72
// characters, so `git log --oneline`, a mail subject and a review tool show it whole. The rule
// holds from RULE_BASE on: the history before it has long subjects and is not rewritten.
//
//   node scripts/check-commits.mjs                     the commits after RULE_BASE up to HEAD
//   node scripts/check-commits.mjs --base <commit>     the commits after another base
//   node scripts/check-commits.mjs --message-file F    one message about to be committed (the
//                                                      commit-msg hook, `npm run hooks`)
//
// CI may clone shallowly: when RULE_BASE is not in the history the script checks every commit
// it has and says so (a shallow clone holds only commits newer than the base it cut off).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

/** The last commit before the rule; everything after it is checked. */
const RULE_BASE = '3c619a9';
const MAX_SUBJECT = 72;

/** Length as a reader counts it: one per character, whatever its UTF-16 width. */
const length = (subject) => [...subject].length;

function git(args) {
  return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function hasCommit(rev) {
  try {
    git(['cat-file', '-e', `${rev}^{commit}`]);
    return true;
  } catch {
    return false;
  }
}

/** Commit hash and subject, newest first, of the range git log is given. */
function subjects(range) {
  const out = git(['log', '--format=%h%x09%s', ...range]);
  return out
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const tab = line.indexOf('\t');
      return { hash: line.slice(0, tab), subject: line.slice(tab + 1) };
    });
}

function fail(lines) {
  for (const line of lines) console.error(line);
  process.exit(1);
}

function checkMessageFile(file) {
  // The subject is the first line that is not a comment (git strips `#` lines itself).
  const subject = fs
    .readFileSync(file, 'utf8')
    .split(/\r?\n/)
    .find((line) => !line.startsWith('#') && line.trim() !== '');
  if (subject === undefined || length(subject) <= MAX_SUBJECT) return;
  fail([
    `commit subject is ${length(subject)} characters; at most ${MAX_SUBJECT}:`,
    `  ${subject}`,
    'Shorten the first line; put the rest in the body, after a blank line.',
  ]);
}

function checkHistory(base) {
  let range;
  let scope;
  if (hasCommit(base)) {
    range = [`${base}..HEAD`];
    scope = `after ${base}`;
  } else {
    const shallow = git(['rev-parse', '--is-shallow-repository']).trim() === 'true';
    range = ['HEAD'];
    scope = `in this ${shallow ? 'shallow ' : ''}clone (base ${base} is not in its history)`;
  }
  const commits = subjects(range);
  const long = commits.filter((c) => length(c.subject) > MAX_SUBJECT);
  if (long.length > 0) {
    fail([
      `${long.length} of ${commits.length} commit subjects ${scope} are over ${MAX_SUBJECT} characters:`,
      ...long.map((c) => `  ${c.hash} (${length(c.subject)}) ${c.subject}`),
      'Reword them (git rebase -i, "reword") before they reach main.',
    ]);
  }
  console.log(`commit subjects: ${commits.length} checked ${scope}, all at most ${MAX_SUBJECT} characters`);
}

const args = process.argv.slice(2);
const option = (name) => {
  const at = args.indexOf(name);
  return at === -1 ? undefined : args[at + 1];
};
const messageFile = option('--message-file');
if (messageFile) checkMessageFile(messageFile);
else checkHistory(option('--base') ?? RULE_BASE);
