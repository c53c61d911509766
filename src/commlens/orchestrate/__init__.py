"""Running campaigns: a campaign's workflow under supervision with its progress on the console
(workflow_run, workflow_output), launches in rounds until decided (until_decided), and bisections
(bisection_steps: which release brought a change; campaign_bisections: a campaign's `bisect:`
entries), composed by campaign_run. Calls are typed (plain parameters, frozen dataclasses) and what
they record is typed too (commlens.analysis.bisection.BisectionRecord); the front ends (commlens.cli)
parse arguments, call these and print what they return."""
