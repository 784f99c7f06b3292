use hermes_runtime::prelude::toolsets;

toolsets! {
    const CORE = [fx_noop, fx_echo];
    /// Everything well-behaved.
    toolset "fx_all_good" { tools: [fx_noop], includes: ["fx_basic", "fx_slow"] }
    /// A cycle with fx_cycle_b.
    toolset "fx_cycle_a" { tools: [fx_noop], includes: ["fx_cycle_b"] }
    /// A cycle with fx_cycle_a.
    toolset "fx_cycle_b" { tools: [fx_echo], includes: ["fx_cycle_a"] }
    /// A preset: the core plus the faulty tools.
    toolset "hermes-fx" { tools: CORE + [fx_panic, fx_fail] }
    legacy "fx_old_tools" = [fx_echo];
}
