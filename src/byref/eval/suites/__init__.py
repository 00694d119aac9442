"""The eval's task suites, one module each: `nestful`, `corpus`, `status`, `selection`."""
