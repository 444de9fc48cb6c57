import { ArgumentControl, BudgetSection, FieldIssues, ScheduleSection } from './grant-conditions-form.js';
import { boundsTyped, type Issue, type Property, type Scope, type Typed } from './grant-conditions-typed.js';

/**
 * The conditions of grants about to be created, folded inside the form that creates them (an
 * agent's grants of one device, a gateway grant): argument bounds for each function that has
 * arguments (`functions`; none on a gateway grant), then a schedule and a budget for every
 * function granted. Open when something is typed or refused.
 */
export function NewGrantConditions(props: {
  scope: Scope;
  functions: { name: string; properties: Record<string, Property> }[];
  typed: Typed;
  args: Record<string, Typed['args']>;
  issues: Issue[];
  open: boolean;
  note: string;
}) {
  const { scope, typed, issues } = props;
  const argumentIssues = issues.filter((i) => i.path === 'conditions.arguments');
  return (
    <details class="new-conditions" id={`${scope.id}conditions`} open={props.open}>
      <summary>Conditions (optional): how far, when and how often</summary>
      <p class="muted">{props.note}</p>
      {props.functions.length > 0 ? (
        <section aria-labelledby={`${scope.id}arguments-heading`}>
          <h3 id={`${scope.id}arguments-heading`}>How far: arguments</h3>
          <p class="muted">Bounds apply when you grant that one function on its own; leave them empty for none.</p>
          {props.functions.map((fn) => (
            <fieldset data-bounds-for={fn.name}>
              <legend>
                Bounds on <code class="fn">{fn.name}</code>
              </legend>
              {Object.entries(fn.properties).map(([name, property]) => (
                <ArgumentControl
                  name={name}
                  property={property}
                  typed={props.args[fn.name]?.[name]}
                  issues={props.args[fn.name] && boundsTyped(props.args[fn.name]!, fn.properties) ? issues : []}
                  scope={{ id: `${scope.id}${fn.name}-`, name: `${scope.name}${fn.name}:` }}
                />
              ))}
            </fieldset>
          ))}
          <FieldIssues id={`${scope.id}arguments-issues`} issues={argumentIssues} />
        </section>
      ) : null}
      <ScheduleSection typed={typed} issues={issues} scope={scope} level={3} rows={1} />
      <BudgetSection typed={typed} issues={issues} scope={scope} level={3} />
    </details>
  );
}
