import type { Hono } from 'hono';
import { operations } from '../../domain/registry.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards } from '../guards.js';
import { Csrf, Flash, Icon, Page, Secret, Time, type Viewer } from '../layout.js';

/**
 * Board enrollment codes (`enrollments.create`, legacy): a one-use code valid 10 minutes that a
 * board without the device SDK trades for its credential at `POST /v1/device/enroll`. The code is
 * shown once, in the answer to the post.
 */

function EnrollmentsPage(props: { viewer: Viewer; created?: { code: string; expiresAt: number }; error?: string }) {
  return (
    <Page title="Enrollment codes" viewer={props.viewer} screen="enrollments">
      <Flash error={props.error} />
      <p class="lede">
        For boards that cannot use a setup token: create a one-use code, valid for 10 minutes, and type it into the board. The board sends it to{' '}
        <code>POST /v1/device/enroll</code> with its name and gets its device credential. For new devices prefer <a href="/console/attach">a setup token</a>.
      </p>
      {props.created ? (
        <>
          <Secret id="enrollment-code" label="Enrollment code" value={props.created.code} />
          <p>
            Valid until <Time ms={props.created.expiresAt} />, for one board.
          </p>
        </>
      ) : null}
      <form method="post" action="/console/enrollments">
        <Csrf viewer={props.viewer} />
        <button type="submit" class="primary" id="create-enrollment">
          <Icon name="ticket" />
          Create an enrollment code
        </button>
      </form>
    </Page>
  );
}

export function mountEnrollments(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/enrollments',
    guards.page((c, signed) => c.html(<EnrollmentsPage viewer={signed.viewer} />)),
  );

  app.post(
    '/console/enrollments',
    guards.action(async (c, signed) => {
      const created = await guards.attempt(signed, operations.createEnrollment, {});
      if (!created.ok) return c.html(<EnrollmentsPage viewer={signed.viewer} error={created.message} />, created.status);
      // Shown in the answer to this post and nowhere else.
      return c.html(<EnrollmentsPage viewer={signed.viewer} created={created.value} />);
    }),
  );
}
