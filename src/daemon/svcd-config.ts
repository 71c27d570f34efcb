// config.toml's table of sections (each parsed by its area's config-section.ts). daemon.ts
// reads the file once and hands each component its sections; no component reads it itself.
// An area adds its table with one line in CONFIG_SECTIONS.
import {
  type ConfigOf,
  type ConfigSections,
  loadSections,
  parseSections,
  sectionDefaults,
} from './config/section.js';
import type { TomlDoc } from './config/toml.js';
import { fanoutSection } from './fanout/config-section.js';
import { runtimeSection } from './runtimes/config-section.js';
import { supervisorSection, watchdogSection } from './supervisor/config-section.js';
import { workerSection } from './worker/config-section.js';
import { agentPolicySection } from './worker/policy-section.js';

/** Every table config.toml may have. Areas append theirs: `worker: workerSection,`. */
export const CONFIG_SECTIONS = {
  runtime: runtimeSection,
  supervisor: supervisorSection,
  watchdog: watchdogSection,
  worker: workerSection,
  agent_policy: agentPolicySection,
  fanout: fanoutSection,
} satisfies ConfigSections;

export type SvcdConfig = ConfigOf<typeof CONFIG_SECTIONS>;

/** Parses a config document; throws config_invalid with file, line and field. */
export function parseSvcdConfig(doc: TomlDoc): SvcdConfig {
  return parseSections(doc, CONFIG_SECTIONS);
}

/** The configuration with every default (what a missing config.toml means). */
export function defaultSvcdConfig(): SvcdConfig {
  return sectionDefaults(CONFIG_SECTIONS);
}

/** Reads $SVC_HOME/svcd/config.toml (absent: defaults). */
export function loadSvcdConfig(file: string): Promise<SvcdConfig> {
  return loadSections(file, CONFIG_SECTIONS);
}
