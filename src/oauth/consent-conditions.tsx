import { budgetWords, DAYS, grantConditionsInput, normalizeConditions, periodWords, scheduleWords, type Day } from '../domain/grant-conditions.js';
import type { ErrorIssue } from '../domain/errors.js';

/**
 * The conditions the owner may set on the consent page for the functions they check
 * (docs/agents/oauth.md "Consent page, sign-in and cookies"): one weekly schedule window with its time
 * zone and a budget, applied to every picked grant through `grants.create`'s `conditions`, so
 * the operation validates them. Argument bounds are set later, on the console's Conditions page.
 */

/** Budget windows offered, as on the console's conditions form. */
export const CONSENT_PERIODS = [60, 600, 3600, 86_400, 604_800, 2_592_000] as const;

const DAY_NAMES: Record<Day, string> = { mon: 'Monday', tue: 'Tuesday', wed: 'Wednesday', thu: 'Thursday', fri: 'Friday', sat: 'Saturday', sun: 'Sunday' };

/** What the owner typed in the conditions fields. */
export interface TypedConditions {
  days: Day[];
  from: string;
  to: string;
  timeZone: string;
  budgetMax: string;
  budgetPer: string;
}

export const NO_TYPED_CONDITIONS: TypedConditions = { days: [], from: '', to: '', timeZone: 'UTC', budgetMax: '', budgetPer: '3600' };

export function typedConditionsOf(form: URLSearchParams): TypedConditions {
  return {
    days: DAYS.filter((day) => form.get(`cond:day:${day}`) === 'on'),
    from: form.get('cond:from') ?? '',
    to: form.get('cond:to') ?? '',
    timeZone: (form.get('cond:timeZone') ?? '').trim() || 'UTC',
    budgetMax: form.get('cond:budgetMax') ?? '',
    budgetPer: form.get('cond:budgetPer') ?? '3600',
  };
}

/** A typed number as the operation should read it: the text itself when it is not one (the operation says why). */
const numberOf = (raw: string): number | string => (Number.isFinite(Number(raw)) ? Number(raw) : raw);

/** `grants.create`'s `conditions` from what was typed; undefined when nothing is set. */
export function conditionsInputOf(typed: TypedConditions): Record<string, unknown> | undefined {
  const conditions: Record<string, unknown> = {};
  if (typed.days.length > 0 || typed.from !== '' || typed.to !== '')
    conditions.schedule = { timeZone: typed.timeZone, windows: [{ days: typed.days, from: typed.from, to: typed.to }] };
  if (typed.budgetMax.trim() !== '') conditions.budget = { max: numberOf(typed.budgetMax.trim()), perSeconds: numberOf(typed.budgetPer) };
  return Object.keys(conditions).length > 0 ? conditions : undefined;
}

/** The typed conditions in the domain's words, when they are valid ones. */
function conditionsWords(typed: TypedConditions): string[] | undefined {
  const input = conditionsInputOf(typed);
  if (!input) return undefined;
  const parsed = grantConditionsInput.safeParse(input);
  const conditions = parsed.success ? normalizeConditions(parsed.data) : null;
  if (!conditions) return undefined;
  return [...(conditions.schedule ? [`only ${scheduleWords(conditions.schedule)}`] : []), ...(conditions.budget ? [budgetWords(conditions.budget)] : [])];
}

const at = (issues: readonly ErrorIssue[], ...paths: string[]) =>
  issues.filter((issue) => paths.some((path) => issue.path === path || issue.path.startsWith(`${path}.`)));

function FieldIssues(props: { id: string; issues: ErrorIssue[] }) {
  if (props.issues.length === 0) return null;
  return (
    <p class="field-error" id={props.id}>
      {props.issues.map((issue) => issue.message).join('; ')}
    </p>
  );
}

/** aria attributes that tie a control to the issues beside it. */
const invalid = (issues: ErrorIssue[], id: string) => (issues.length > 0 ? { 'aria-invalid': 'true' as const, 'aria-describedby': id } : {});

export function ConsentConditions(props: { typed: TypedConditions; issues: readonly ErrorIssue[] }) {
  const { typed, issues } = props;
  const words = conditionsWords(typed);
  return (
    <fieldset id="conditions">
      <legend>Conditions on what you check (optional)</legend>
      <p class="muted">
        Applied to every function you check above. Leave them empty for none. Argument bounds (how far an action may go) are set later, on each grant&apos;s
        Conditions page in the console.
      </p>
      <p id="conditions-words">
        {words
          ? `The functions you check are allowed ${words.join(', ')}.`
          : 'No conditions: the functions you check are allowed at any time, as often as asked.'}
      </p>
      <ScheduleFields typed={typed} issues={issues} />
      <BudgetFields typed={typed} issues={issues} />
    </fieldset>
  );
}

type FieldsProps = { typed: TypedConditions; issues: readonly ErrorIssue[] };

/** One weekly window: its days, from and to, and the time zone it is read in. */
function ScheduleFields({ typed, issues }: FieldsProps) {
  const window = 'conditions.schedule.windows.0';
  const daysIssues = at(issues, `${window}.days`);
  const fromIssues = at(issues, `${window}.from`);
  const toIssues = at(issues, `${window}.to`);
  const zoneIssues = at(issues, 'conditions.schedule.timeZone');
  const otherSchedule = at(issues, 'conditions.schedule').filter((i) => ![...daysIssues, ...fromIssues, ...toIssues, ...zoneIssues].includes(i));
  return (
    <fieldset id="condition-schedule">
      <legend>Schedule: when actions are allowed</legend>
      <div class="choices" role="group" aria-label="Days the window starts on" {...invalid(daysIssues, 'cond-days-issues')}>
        {DAYS.map((day) => (
          <label>
            <input type="checkbox" name={`cond:day:${day}`} value="on" checked={typed.days.includes(day)} /> {DAY_NAMES[day]}
          </label>
        ))}
      </div>
      <FieldIssues id="cond-days-issues" issues={daysIssues} />
      <div class="row-fields">
        <div>
          <label for="cond-from">From (included)</label>
          <input type="time" id="cond-from" name="cond:from" value={typed.from} {...invalid(fromIssues, 'cond-from-issues')} />
          <FieldIssues id="cond-from-issues" issues={fromIssues} />
        </div>
        <div>
          <label for="cond-to">To (excluded)</label>
          <input type="time" id="cond-to" name="cond:to" value={typed.to} {...invalid(toIssues, 'cond-to-issues')} />
          <FieldIssues id="cond-to-issues" issues={toIssues} />
        </div>
        <div>
          <label for="cond-time-zone">Time zone</label>
          <input
            type="text"
            id="cond-time-zone"
            name="cond:timeZone"
            value={typed.timeZone}
            maxlength={64}
            autocomplete="off"
            spellcheck={false}
            {...invalid(zoneIssues, 'cond-time-zone-issues')}
          />
          <FieldIssues id="cond-time-zone-issues" issues={zoneIssues} />
        </div>
      </div>
      <p class="muted">An IANA zone name such as Europe/Berlin. A "to" earlier than "from" runs past midnight; equal to it is the whole day.</p>
      <FieldIssues id="cond-schedule-issues" issues={otherSchedule} />
    </fieldset>
  );
}

/** At most so many calls in a sliding window of one of the offered lengths. */
function BudgetFields({ typed, issues }: FieldsProps) {
  const perIssues = at(issues, 'conditions.budget.perSeconds');
  const maxIssues = at(issues, 'conditions.budget').filter((i) => !perIssues.includes(i));
  return (
    <fieldset id="condition-budget">
      <legend>Budget: how often</legend>
      <div class="row-fields">
        <div>
          <label for="cond-budget-max">At most (calls)</label>
          <input
            type="number"
            id="cond-budget-max"
            name="cond:budgetMax"
            min="1"
            step="1"
            value={typed.budgetMax}
            {...invalid(maxIssues, 'cond-budget-max-issues')}
          />
          <FieldIssues id="cond-budget-max-issues" issues={maxIssues} />
        </div>
        <div>
          <label for="cond-budget-per">Per</label>
          <select id="cond-budget-per" name="cond:budgetPer" {...invalid(perIssues, 'cond-budget-per-issues')}>
            {CONSENT_PERIODS.map((seconds) => (
              <option value={String(seconds)} selected={String(seconds) === typed.budgetPer}>
                {periodWords(seconds)}
              </option>
            ))}
          </select>
          <FieldIssues id="cond-budget-per-issues" issues={perIssues} />
        </div>
      </div>
      <p class="muted">Counted for each function on its own, in a sliding window. Leave "at most" empty for no budget.</p>
    </fieldset>
  );
}
