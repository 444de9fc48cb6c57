import type { Day } from '../../domain/grant-conditions.js';
import { DAYS, periodWords } from '../../domain/grant-conditions.js';
import { Csrf, Icon, type Viewer } from '../layout.js';
import type { Grant } from './grant-parts.js';
import { choicesOf, MAX_WINDOWS, PAGE, text, typesOf, type Issue, type Json, type Property, type Scope, type Typed } from './grant-conditions-typed.js';

/**
 * The form of a grant's conditions (docs/owners/grants.md "Conditions"): a control that fits each
 * argument of the function's schema (a range for numbers, a choice list for enums and yes-or-no,
 * a length for text), weekly windows with a time zone select, and a budget. It is filled from the
 * grant, or from what the owner typed when the service refused it, with each issue beside its field.
 * The conditions page holds one such form; the forms that create grants (an agent's grants, a
 * gateway grant) hold its pieces under a `Scope`, so several sit on one page.
 */

const DAY_NAMES: Record<Day, string> = { mon: 'Monday', tue: 'Tuesday', wed: 'Wednesday', thu: 'Thursday', fri: 'Friday', sat: 'Saturday', sun: 'Sunday' };
const DAY_SHORT: Record<Day, string> = { mon: 'Mon', tue: 'Tue', wed: 'Wed', thu: 'Thu', fri: 'Fri', sat: 'Sat', sun: 'Sun' };

/** Budget windows offered; a grant set over the API with another one keeps it as an extra choice. */
const PERIODS = [60, 600, 3600, 86_400, 604_800, 2_592_000];

/** Every zone name the runtime knows, UTC first. */
const ZONES = ['UTC', ...Intl.supportedValuesOf('timeZone').filter((zone) => zone !== 'UTC')];

/** The issues the service gave at or below `path`. */
const at = (issues: Issue[], path: string) => issues.filter((i) => i.path === path || i.path.startsWith(`${path}.`));

export function FieldIssues(props: { id: string; issues: Issue[] }) {
  if (props.issues.length === 0) return null;
  return (
    <p class="field-error" id={props.id}>
      {props.issues.map((i) => i.message).join('; ')}
    </p>
  );
}

/** aria attributes that tie a control to the issues beside it. */
const invalid = (issues: Issue[], id: string) => (issues.length > 0 ? { 'aria-invalid': 'true' as const, 'aria-describedby': id } : {});

const choiceLabel = (value: Json) => (value === true ? 'yes (true)' : value === false ? 'no (false)' : String(value));

type Aria = ReturnType<typeof invalid>;
type TypedArgument = Typed['args'][string];

/** A number range: the least and greatest value, within what the schema allows. */
function NumberBounds(props: { name: string; property: Property; typed: TypedArgument; aria: Aria; scope: Scope }) {
  const { name, property, typed, aria, scope } = props;
  const types = typesOf(property);
  const id = `${scope.id}arg-${name}`;
  const field = `${scope.name}arg:${name}`;
  const step = types.includes('integer') && !types.includes('number') ? '1' : 'any';
  const range = [property.minimum !== undefined ? `from ${property.minimum}` : '', property.maximum !== undefined ? `to ${property.maximum}` : '']
    .filter(Boolean)
    .join(' ');
  return (
    <div class="row-fields">
      <div>
        <label for={`${id}-minimum`}>Least {name}</label>
        <input
          type="number"
          id={`${id}-minimum`}
          name={`${field}:minimum`}
          step={step}
          min={text(property.minimum)}
          max={text(property.maximum)}
          value={typed.minimum}
          {...aria}
        />
      </div>
      <div>
        <label for={`${id}-maximum`}>Greatest {name}</label>
        <input
          type="number"
          id={`${id}-maximum`}
          name={`${field}:maximum`}
          step={step}
          min={text(property.minimum)}
          max={text(property.maximum)}
          value={typed.maximum}
          {...aria}
        />
      </div>
      <p class="muted">{range ? `The function allows ${range}.` : 'The function sets no range.'} Leave empty for no bound.</p>
    </div>
  );
}

/** A choice list: each value of the schema's enum (or yes and no), ticked when allowed. */
function ChoiceBounds(props: { name: string; choices: Json[]; typed: TypedArgument; aria: Aria; scope: Scope }) {
  const { name, choices, typed, aria, scope } = props;
  const id = `${scope.id}arg-${name}`;
  const field = `${scope.name}arg:${name}`;
  return (
    <div class="choices" role="group" aria-label={`Allowed values of ${name}`}>
      <input type="hidden" name={`${field}:choices`} value="1" />
      {choices.map((value, index) => (
        <label>
          <input
            type="checkbox"
            name={`${field}:enum:${index}`}
            id={`${id}-choice-${index}`}
            value={JSON.stringify(value)}
            checked={typed.enum === undefined || typed.enum.includes(JSON.stringify(value))}
            {...aria}
          />{' '}
          {choiceLabel(value)}
        </label>
      ))}
      <p class="muted">Untick a value to refuse it.</p>
    </div>
  );
}

/** The control that fits one argument of the function's schema, with the service's issues at `conditions.arguments.<name>`. */
export function ArgumentControl(props: { name: string; property: Property; typed: Typed['args'][string] | undefined; issues: Issue[]; scope?: Scope }) {
  const { name, property } = props;
  const scope = props.scope ?? PAGE;
  const typed = props.typed ?? { minimum: '', maximum: '', maxLength: '', enum: undefined };
  const types = typesOf(property);
  const numeric = types.includes('number') || types.includes('integer');
  const choices = choicesOf(property);
  const id = `${scope.id}arg-${name}`;
  const issueId = `${id}-issues`;
  const mine = at(props.issues, `conditions.arguments.${name}`);
  const aria = invalid(mine, issueId);
  return (
    <fieldset data-argument={name}>
      <legend>
        <code>{name}</code>
        {property.description ? <span class="muted"> · {property.description}</span> : null}
      </legend>
      {numeric ? <NumberBounds name={name} property={property} typed={typed} aria={aria} scope={scope} /> : null}
      {choices ? <ChoiceBounds name={name} choices={choices} typed={typed} aria={aria} scope={scope} /> : null}
      {types.includes('string') && !choices ? (
        <div>
          <label for={`${id}-maxLength`}>Most characters of {name}</label>
          <input
            type="number"
            id={`${id}-maxLength`}
            name={`${scope.name}arg:${name}:maxLength`}
            min="0"
            max={text(property.maxLength)}
            step="1"
            value={typed.maxLength}
            {...aria}
          />
        </div>
      ) : null}
      {!numeric && !choices && !types.includes('string') ? <p class="muted">No bound fits this argument.</p> : null}
      <FieldIssues id={issueId} issues={mine} />
    </fieldset>
  );
}

function WindowRow(props: { index: number; typed: Typed['windows'][number] | undefined; issues: Issue[]; scope: Scope }) {
  const i = props.index;
  const { scope } = props;
  const typed = props.typed ?? { days: [], from: '', to: '' };
  const issueId = `${scope.id}w${i}-issues`;
  const mine = at(props.issues, `conditions.schedule.windows.${i}`);
  const aria = invalid(mine, issueId);
  return (
    <fieldset data-window={String(i)}>
      <legend>Window {i + 1}</legend>
      <div class="choices" role="group" aria-label={`Days window ${i + 1} starts on`}>
        {DAYS.map((day) => (
          <label>
            <input type="checkbox" name={`${scope.name}w${i}:${day}`} value="on" data-day={day} checked={typed.days.includes(day)} {...aria} />{' '}
            <abbr title={DAY_NAMES[day]}>{DAY_SHORT[day]}</abbr>
          </label>
        ))}
      </div>
      <div class="row-fields">
        <div>
          <label for={`${scope.id}w${i}-from`}>From</label>
          <input type="time" id={`${scope.id}w${i}-from`} name={`${scope.name}w${i}:from`} value={typed.from} {...aria} />
        </div>
        <div>
          <label for={`${scope.id}w${i}-to`}>Until</label>
          <input type="time" id={`${scope.id}w${i}-to`} name={`${scope.name}w${i}:to`} value={typed.to} {...aria} />
        </div>
      </div>
      <FieldIssues id={issueId} issues={mine} />
    </fieldset>
  );
}

/** A section heading: `h2` on the conditions page, `h3` inside a grant form. */
function Heading(props: { level: 2 | 3; id: string; children: string }) {
  return props.level === 2 ? <h2 id={props.id}>{props.children}</h2> : <h3 id={props.id}>{props.children}</h3>;
}

/** Weekly windows and the time zone they are read in; `rows` empty windows at least. */
export function ScheduleSection(props: { typed: Typed; issues: Issue[]; scope?: Scope; level?: 2 | 3; rows?: number }) {
  const { typed, issues } = props;
  const scope = props.scope ?? PAGE;
  const rows = Math.min(MAX_WINDOWS, Math.max(props.rows ?? 2, typed.windows.length + 1));
  const zoneIssues = at(issues, 'conditions.schedule.timeZone');
  const scheduleIssues = issues.filter((i) => i.path === 'conditions.schedule' || i.path === 'conditions.schedule.windows');
  return (
    <section aria-labelledby={`${scope.id}schedule-heading`}>
      <Heading level={props.level ?? 2} id={`${scope.id}schedule-heading`}>
        When: a weekly schedule
      </Heading>
      <p class="muted">
        Actions are allowed only inside a window. The days are the days a window starts; an end before its start runs past midnight; the same start and end is
        the whole day. No window ticked: any time.
      </p>
      <div>
        <label for={`${scope.id}timeZone`}>Time zone the windows are read in</label>
        <select id={`${scope.id}timeZone`} name={`${scope.name}timeZone`} {...invalid(zoneIssues, `${scope.id}timeZone-issues`)}>
          {(ZONES.includes(typed.timeZone) ? ZONES : [typed.timeZone, ...ZONES]).map((zone) => (
            <option value={zone} selected={zone === typed.timeZone}>
              {zone}
            </option>
          ))}
        </select>
        <FieldIssues id={`${scope.id}timeZone-issues`} issues={zoneIssues} />
      </div>
      {Array.from({ length: rows }, (_, i) => (
        <WindowRow index={i} typed={typed.windows[i]} issues={issues} scope={scope} />
      ))}
      <FieldIssues id={`${scope.id}schedule-issues`} issues={scheduleIssues} />
    </section>
  );
}

/** A budget: at most so many actions in any window of a chosen length. */
export function BudgetSection(props: { typed: Typed; issues: Issue[]; scope?: Scope; level?: 2 | 3 }) {
  const { typed } = props;
  const scope = props.scope ?? PAGE;
  const budgetIssues = at(props.issues, 'conditions.budget');
  const periods = PERIODS.includes(Number(typed.budgetPer)) ? PERIODS : [...PERIODS, Number(typed.budgetPer)].sort((a, b) => a - b);
  return (
    <section aria-labelledby={`${scope.id}budget-heading`}>
      <Heading level={props.level ?? 2} id={`${scope.id}budget-heading`}>
        How often: a budget
      </Heading>
      <div class="row-fields">
        <div>
          <label for={`${scope.id}budgetMax`}>At most this many actions</label>
          <input
            type="number"
            id={`${scope.id}budgetMax`}
            name={`${scope.name}budgetMax`}
            min="1"
            max="100000"
            step="1"
            value={typed.budgetMax}
            aria-describedby={budgetIssues.length > 0 ? `${scope.id}budget-issues` : `${scope.id}budget-help`}
            {...(budgetIssues.length > 0 ? { 'aria-invalid': 'true' } : {})}
          />
        </div>
        <div>
          <label for={`${scope.id}budgetPer`}>In any</label>
          <select id={`${scope.id}budgetPer`} name={`${scope.name}budgetPer`}>
            {periods.map((seconds) => (
              <option value={String(seconds)} selected={String(seconds) === typed.budgetPer}>
                {periodWords(seconds)}
              </option>
            ))}
          </select>
        </div>
      </div>
      <p class="muted" id={`${scope.id}budget-help`}>
        Empty: no budget. Counted for this agent, device and function; a cancelled or rejected action counts too.
      </p>
      <FieldIssues id={`${scope.id}budget-issues`} issues={budgetIssues} />
    </section>
  );
}

export function ConditionsForm(props: { grant: Grant; properties: Record<string, Property>; typed: Typed; issues: Issue[]; back: string; viewer: Viewer }) {
  const { typed, issues } = props;
  const names = Object.keys(props.properties);
  const argumentIssues = issues.filter((i) => i.path === 'conditions.arguments');
  return (
    <form method="post" action="/console/grants/conditions" id="conditions-form">
      <Csrf viewer={props.viewer} />
      <input type="hidden" name="grantId" value={props.grant.id} />
      <input type="hidden" name="back" value={props.back} />
      <section aria-labelledby="arguments-heading">
        <h2 id="arguments-heading">How far: arguments</h2>
        {props.grant.gatewayId ? (
          <p class="muted">A grant written by a gateway grant takes a schedule and a budget only.</p>
        ) : names.length === 0 ? (
          <p class="muted">This function takes no arguments.</p>
        ) : (
          names.map((name) => <ArgumentControl name={name} property={props.properties[name]!} typed={typed.args[name]} issues={issues} />)
        )}
        <FieldIssues id="arguments-issues" issues={argumentIssues} />
      </section>
      <ScheduleSection typed={typed} issues={issues} />
      <BudgetSection typed={typed} issues={issues} />
      <div class="toolbar">
        <button type="submit" class="primary" id="save-conditions">
          <Icon name="check" />
          Save conditions
        </button>
        <button type="submit" name="clear" value="1" id="clear-conditions">
          Remove all conditions
        </button>
        <a href={props.back}>Back to grants</a>
      </div>
    </form>
  );
}
