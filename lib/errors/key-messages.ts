/**
 * The messages of key templates that cannot work: a placeholder that names nothing, or two
 * things, or a source Nest does not fill. Each stops the app at bootstrap (or the class at its
 * definition) and says what to write instead.
 */
export const keyMessages = {
  unknownPlaceholder: (
    template: string,
    placeholder: string,
    where: string,
    known: string[],
    meant?: string,
  ) =>
    `Lock key template "${template}" on ${where}: placeholder <${placeholder}> names no parameter` +
    (known.length
      ? ` (parameters: ${known.join(', ')})`
      : ' (the method has no named parameters)') +
    (meant ? `; did you mean <${meant}>?` : '.') +
    ' Fix the placeholder, or use an argument index like <0.id>.',
  ambiguousPlaceholder: (template: string, placeholder: string, where: string, matches: string[]) =>
    `Lock key template "${template}" on ${where}: <${placeholder}> matches ${matches.length} ` +
    `parameters: ${matches.join(', ')}. A key part must come from one place: rename a parameter, ` +
    'or name the source, e.g. <params.x> or <body.x>.',
  unknownRoutePlaceholder: (
    template: string,
    placeholder: string,
    where: string,
    meant: string[],
    parameters: string[],
    namesHidden: boolean,
  ) =>
    `Lock key template "${template}" on ${where}: <${placeholder}> matches no parameter of the ` +
    `handler (${parameters.length ? `parameters: ${parameters.join(', ')}` : 'it has no bound parameters'}). ` +
    `A bare name must be a parameter's name or the name its decorator gives it (@Param('x') answers ` +
    `to <x>); otherwise name the source. Did you mean ${meant.join(', ')}?` +
    (namesHidden
      ? ' The parameter names could not be read (another decorator may wrap the method): put ' +
        '@Locked() closest to the method, or use the names the parameter decorators give.'
      : ''),
  unknownResolverPlaceholder: (
    template: string,
    placeholder: string,
    where: string,
    parameters: string[],
    namesHidden: boolean,
  ) =>
    `Lock key template "${template}" on ${where}: <${placeholder}> matches no parameter of the ` +
    `resolver (${parameters.length ? `parameters: ${parameters.join(', ')}` : 'it has no bound parameters'}). ` +
    "A bare name must be a parameter's name or the name @Args gives it (@Args('uid') userId " +
    'answers to <uid> and <userId>); reach inside with a dotted path (<input.userId>). Bind the ' +
    'value with @Args(), @Parent() or @Context(), or use a key function.' +
    (namesHidden
      ? ' The parameter names could not be read (another decorator may wrap the method): put ' +
        '@Locked() closest to the method, or use the names @Args gives.'
      : ''),
  lockedSubscription: (where: string) =>
    `@Locked() on ${where}: a subscription returns an event stream, so a lock would cover only ` +
    "the stream's creation, not the events. Lock the work that publishes the events instead.",
  unknownRouteParam: (template: string, placeholder: string, where: string, params: string[]) =>
    `Lock key template "${template}" on ${where}: <${placeholder}> names no param of the route ` +
    `(route params: ${params.length ? params.join(', ') : 'none'}). Fix the name; for a param a ` +
    "global prefix or a RouterModule path adds, bind it on the handler with @Param('name').",
  sourceConflict: (template: string, placeholder: string, where: string, parameter: string) =>
    `Lock key template "${template}" on ${where}: <${placeholder}> names a part of the request, ` +
    `and also the parameter ${parameter}, which is bound to something else. Rename the parameter, ` +
    'or key on it by the name its decorator gives it.',
  badTemplate: (template: string, why: string) =>
    `Lock key template "${template}" is invalid: ${why}.`,
  paramNamesUnreadable: (where: string) =>
    `Cannot read the parameter names of ${where}: another decorator may wrap it. ` +
    'Put @Locked() closest to the method, or use argument indexes like <0.id>, or a key function.',
  keyFunctionResult: (where: string, what: string) =>
    `The key function of @Locked() on ${where} returned ${what}; it must return a non-empty ` +
    'string, or a non-empty array of them to lock several keys together.',
};
