// Failures counted in the window, read by alerts/alerts.libsonnet and rules/rules.libsonnet. The
// agent creates a failure counter's series at the first failure (by error), or with a process it
// just saw, so increase() alone misses the first ones (a burst of 3 launch failures in one scrape
// would never page); a series absent one window ago counts from zero. Used for every rule on such
// a counter. The price: for one window after Prometheus starts with no history, every existing
// count looks new. A window longer than the alert's `for` lets a single burst fire.
function(metric, window)
  '(%(m)s unless %(m)s offset %(w)s or increase(%(m)s[%(w)s]))' % { m: metric, w: window }
