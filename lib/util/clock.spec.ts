import { monotonicNow, suspendedSince, useClockSource } from './clock';

describe('the wall-clock watch (suspendedSince)', () => {
  let monotonic = 0;
  let wall = 0;
  /** Real time passing, seen by both clocks. */
  const pass = (ms: number): void => {
    monotonic += ms;
    wall += ms;
  };

  beforeEach(() => {
    monotonic = 1_000;
    wall = 1_700_000_000_000;
    useClockSource({ monotonic: () => monotonic, wall: () => wall });
    monotonicNow(); // the baseline
  });

  afterAll(() => useClockSource());

  it('counts nothing while both clocks advance together', () => {
    const since = monotonicNow();
    pass(60_000);
    expect(suspendedSince(since)).toBe(0);
  });

  it('counts a jump of the wall clock ahead of the monotonic clock after the given time', () => {
    const since = monotonicNow();
    pass(100);
    wall += 30_000; // suspended for 30 s: the monotonic clock did not see it
    pass(100);
    expect(suspendedSince(since)).toBe(30_000);
    expect(suspendedSince(monotonicNow())).toBe(0); // a lease confirmed after it is not touched
  });

  it('adds up jumps, each counted once', () => {
    const since = monotonicNow();
    wall += 1_000;
    pass(10);
    const between = monotonicNow();
    pass(10);
    wall += 2_000;
    expect(suspendedSince(since)).toBe(3_000);
    expect(suspendedSince(between)).toBe(2_000);
  });

  it('never counts a step back, nor gives the time back when the clock is set right again', () => {
    const since = monotonicNow();
    wall -= 3_600_000;
    pass(10);
    expect(suspendedSince(since)).toBe(0);
    expect(monotonicNow()).toBe(monotonic); // the monotonic clock is what deadlines use
  });

  it('ignores a few ms of difference (whole-ms wall clock, read noise)', () => {
    const since = monotonicNow();
    wall += 5;
    pass(10);
    expect(suspendedSince(since)).toBe(0);
  });

  it('does not take a reading preempted between the two clocks for a jump', () => {
    const since = monotonicNow();
    let late = 40; // the first wall reading comes 40 ms after its monotonic one
    useClockSource({
      monotonic: () => monotonic,
      wall: () => {
        const reading = wall + late;
        late = 0;
        return reading;
      },
    });
    monotonicNow();
    expect(suspendedSince(since)).toBe(0);
  });
});
