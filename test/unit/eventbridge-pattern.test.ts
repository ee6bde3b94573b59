/**
 * The tests' EventBridge pattern matcher against the cases the EventBridge
 * user guide documents ("Creating event patterns", "Content filtering").
 */
import { describe, expect, it } from 'vitest';
import { matches, type Pattern } from '../../shared/events/pattern.js';

const ec2 = {
  version: '0',
  id: '6a7e8feb-b491-4cf7-a9f1-bf3703467718',
  'detail-type': 'EC2 Instance State-change Notification',
  source: 'aws.ec2',
  account: '111122223333',
  time: '2017-12-22T18:43:48Z',
  region: 'us-west-1',
  resources: ['arn:aws:ec2:us-west-1:123456789012:instance/i-1234567890abcdef0'],
  detail: {
    'instance-id': 'i-1234567890abcdef0',
    state: 'terminated',
    'c-count': 5,
    'd-count': 3,
    'x-limit': 301.8,
    'source-ip': '10.0.0.123',
    tags: ['prod', 'web'],
    location: null,
    note: '',
    c: { d: { e: 'deep' } },
  },
};

const cases: [string, Pattern, boolean][] = [
  ['exact source', { source: ['aws.ec2'] }, true],
  ['exact source, other value', { source: ['aws.s3'] }, false],
  ['any of several values', { detail: { state: ['stopped', 'terminated'] } }, true],
  ['fields the pattern does not name are ignored', { 'detail-type': ['EC2 Instance State-change Notification'] }, true],
  ['a field named but absent does not match', { detail: { missing: ['x'] } }, false],
  ['every named field must match (AND)', { source: ['aws.ec2'], detail: { state: ['running'] } }, false],
  ['nested objects', { detail: { c: { d: { e: ['deep'] } } } }, true],
  ['exact number', { detail: { 'c-count': [5] } }, true],
  ['exact number is not the string', { detail: { 'c-count': ['5'] } }, false],
  ['null value', { detail: { location: [null] } }, true],
  ['empty string', { detail: { note: [''] } }, true],
  ['array in the event: any element', { detail: { tags: ['web'] } }, true],
  ['array in the event: no element', { detail: { tags: ['dev'] } }, false],
  ['resources (an array)', { resources: ['arn:aws:ec2:us-west-1:123456789012:instance/i-1234567890abcdef0'] }, true],
  ['account', { account: ['111122223333'] }, true],
  ['prefix', { region: [{ prefix: 'us-' }] }, true],
  ['prefix, no', { region: [{ prefix: 'eu-' }] }, false],
  ['prefix equals-ignore-case', { source: [{ prefix: { 'equals-ignore-case': 'AWS.' } }] }, true],
  ['suffix', { detail: { 'instance-id': [{ suffix: 'def0' }] } }, true],
  ['suffix equals-ignore-case', { detail: { 'instance-id': [{ suffix: { 'equals-ignore-case': 'DEF0' } }] } }, true],
  ['anything-but a value', { detail: { state: [{ 'anything-but': 'initializing' }] } }, true],
  ['anything-but the value itself', { detail: { state: [{ 'anything-but': 'terminated' }] } }, false],
  ['anything-but a list', { detail: { state: [{ 'anything-but': ['stopped', 'overloaded'] }] } }, true],
  ['anything-but a list that holds it', { detail: { state: [{ 'anything-but': ['stopped', 'terminated'] }] } }, false],
  ['anything-but a number', { detail: { 'c-count': [{ 'anything-but': 0 }] } }, true],
  ['anything-but prefix', { detail: { state: [{ 'anything-but': { prefix: 'init' } }] } }, true],
  ['anything-but prefix that matches', { detail: { state: [{ 'anything-but': { prefix: 'term' } }] } }, false],
  ['anything-but suffix', { detail: { 'instance-id': [{ 'anything-but': { suffix: 'def0' } }] } }, false],
  ['anything-but equals-ignore-case (list)', { detail: { state: [{ 'anything-but': { 'equals-ignore-case': ['TERMINATED', 'Stopped'] } }] } }, false],
  ['anything-but wildcard', { detail: { state: [{ 'anything-but': { wildcard: 'run*' } }] } }, true],
  // Element by element, as any condition on an array ("Arrays in event patterns"): 'prod' is not excluded.
  ['anything-but on an array value: one element that passes is enough', { detail: { tags: [{ 'anything-but': 'web' }] } }, true],
  ['anything-but on an array value whose every element is excluded', { detail: { tags: [{ 'anything-but': ['web', 'prod'] }] } }, false],
  ['numeric range', { detail: { 'c-count': [{ numeric: ['>', 0, '<=', 5] }] } }, true],
  ['numeric: a bound on one field, equality on another', { detail: { 'd-count': [{ numeric: ['<', 10] }], 'x-limit': [{ numeric: ['=', 3.018e2] }] } }, true],
  ['numeric on a fraction, outside', { detail: { 'x-limit': [{ numeric: ['>=', 302] }] } }, false],
  ['numeric never matches a string', { detail: { state: [{ numeric: ['>', 0] }] } }, false],
  ['exists: true', { detail: { state: [{ exists: true }] } }, true],
  ['exists: true on a null value', { detail: { location: [{ exists: true }] } }, true],
  ['exists: false on a present field', { detail: { state: [{ exists: false }] } }, false],
  ['exists: false on an absent field', { detail: { missing: [{ exists: false }] } }, true],
  // Event Ruler: "Exists match only works on the leaf nodes. It does not work on intermediate nodes."
  ['exists: true on an object (not a leaf)', { detail: { c: [{ exists: true }] } }, false],
  ['exists: false on an object (not a leaf)', { detail: { c: [{ exists: false }] } }, true],
  ['exists: false below an absent object', { detail: { missing: { deeper: [{ exists: false }] } } }, true],
  ['equals-ignore-case', { 'detail-type': [{ 'equals-ignore-case': 'ec2 instance state-change notification' }] }, true],
  ['wildcard', { resources: [{ wildcard: 'arn:aws:ec2:*:*:instance/*' }] }, true],
  ['wildcard, no', { detail: { state: [{ wildcard: 'run*' }] } }, false],
  ['wildcard with an escaped star', { detail: { note: [{ wildcard: '\\*' }] } }, false],
  ['cidr IPv4', { detail: { 'source-ip': [{ cidr: '10.0.0.0/24' }] } }, true],
  ['cidr IPv4, outside', { detail: { 'source-ip': [{ cidr: '10.0.1.0/24' }] } }, false],
  ['$or: one branch matches', { source: ['aws.ec2'], $or: [{ detail: { state: ['running'] } }, { detail: { 'c-count': [{ numeric: ['>', 4] }] } }] }, true],
  ['$or: no branch matches', { $or: [{ detail: { state: ['running'] } }, { region: ['eu-west-1'] }] }, false],
  ['an empty condition list matches nothing', { source: [] }, false],
];

describe('EventBridge pattern matching (documented cases)', () => {
  it('covers at least 25 documented cases', () => expect(cases.length).toBeGreaterThanOrEqual(25));

  it.each(cases)('%s', (_name, pattern, expected) => {
    expect(matches(pattern, ec2)).toBe(expected);
  });

  it('cidr IPv6', () => {
    expect(matches({ ip: [{ cidr: '2001:db8::/32' }] }, { ip: '2001:db8:1:2::7' })).toBe(true);
    expect(matches({ ip: [{ cidr: '2001:db8::/32' }] }, { ip: '2001:db9::1' })).toBe(false);
  });

  it('an array of objects is crushed out of the path; all of a nested pattern must match within one element (Event Ruler, "JSON Array Matching")', () => {
    const event = {
      employees: [{ firstName: 'John', lastName: 'Doe' }, { firstName: 'Anna', lastName: 'Smith' }, [{ firstName: 'Peter', lastName: 'Jones' }]],
    };
    expect(matches({ employees: { firstName: ['Anna'] } }, event)).toBe(true);
    expect(matches({ employees: { firstName: ['Peter'] } }, event)).toBe(true); // multi-level arrays too
    expect(matches({ employees: { firstName: ['Anna'], lastName: ['Smith'] } }, event)).toBe(true);
    expect(matches({ employees: { firstName: ['Anna'], lastName: ['Jones'] } }, event)).toBe(false); // split across elements
    expect(matches({ employees: { firstName: [{ exists: true }], middle: [{ exists: false }] } }, event)).toBe(true);
    expect(matches({ employees: [{ exists: true }] }, event)).toBe(false); // objects are not leaves
    expect(matches({ tags: [{ exists: true }] }, { tags: [] })).toBe(false); // an empty array holds no value
  });

  it('a malformed pattern is refused, not silently matched', () => {
    expect(() => matches({ source: 'aws.ec2' }, ec2)).toThrow(/a leaf must be an array/);
    expect(() => matches({ source: [{ regex: '.*' }] }, ec2)).toThrow(/unsupported event pattern condition/);
  });
});
