/**
 * The environment for git in a temporary repository: a fixed identity and none of the caller's
 * git settings, so a test behaves the same inside a hook, in CI or on a developer's machine.
 */
export function isolatedGitEnv(home: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: home,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_AUTHOR_NAME: 'Test',
    GIT_AUTHOR_EMAIL: 'test@example.com',
    GIT_COMMITTER_NAME: 'Test',
    GIT_COMMITTER_EMAIL: 'test@example.com',
  };
}
