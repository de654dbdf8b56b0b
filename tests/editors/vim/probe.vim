" What the Vim editor test reads, sourced after the vimrc (vim -S): not part of any
" user configuration. A timer writes, whenever it changed, the state below as JSON
" to $EXPORTLENS_VIM_STATE (a temporary file renamed into place), then sets the
" terminal's title to "exportlens-probe N": the event the test waits on.
"
" State: each Python buffer's text, modified flag and ALE diagnostics (line, code,
" the text ALE keeps); the preview window's lines (where ALE shows a hover of
" several lines); the window the cursor is in; v:errmsg and :messages.

let s:last = ''
let s:seq = 0
set title

function! s:Buffers() abort
    let l:out = []
    for l:info in getbufinfo({'buflisted': 1})
        if l:info.name =~# '\.py$'
            call add(l:out, {
            \   'name': fnamemodify(l:info.name, ':t'),
            \   'text': join(getbufline(l:info.bufnr, 1, '$'), "\n"),
            \   'modified': l:info.changed ? v:true : v:false,
            \   'diagnostics': map(copy(ale#engine#GetLoclist(l:info.bufnr)),
            \       {_, d -> {'line': d.lnum, 'col': d.col, 'code': get(d, 'code', v:null), 'message': d.text}}),
            \})
        endif
    endfor
    return l:out
endfunction

function! s:Preview() abort
    for l:win in getwininfo()
        if getwinvar(l:win.winid, '&previewwindow')
            return getbufline(l:win.bufnr, 1, '$')
        endif
    endfor
    return []
endfunction

function! s:State() abort
    return {
    \   'buffers': s:Buffers(),
    \   'preview': s:Preview(),
    \   'window': {'name': bufname('%'), 'previewwindow': &previewwindow ? v:true : v:false, 'line': line('.')},
    \   'errmsg': v:errmsg,
    \   'messages': execute('messages'),
    \}
endfunction

function! s:Tick(timer) abort
    let l:json = json_encode(s:State())
    if l:json is# s:last
        return
    endif
    let s:last = l:json
    let s:seq += 1
    let l:file = $EXPORTLENS_VIM_STATE
    call writefile([printf('{"seq":%d,"state":%s}', s:seq, l:json)], l:file . '.tmp')
    call rename(l:file . '.tmp', l:file)
    let &titlestring = 'exportlens-probe ' . s:seq
endfunction

call timer_start(200, function('s:Tick'), {'repeat': -1})
