"""wwref native side: prepared-input containers, preparation recipes, the eight workflow families
and the JSON-lines worker that the TypeScript orchestrator drives."""
