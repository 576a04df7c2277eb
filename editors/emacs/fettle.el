;;; fettle.el --- Fettle, a code agent, through eglot  -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9") (jsonrpc "1.0.14"))
;; Keywords: tools, languages, convenience
;; URL: https://github.com/fettle/fettle

;;; Commentary:

;; Fettle is a language server with a code agent inside.  This package
;; registers it with eglot and adds what eglot lacks for it:
;;
;; - ghost text from `textDocument/inlineCompletion' (`fettle-ghost-mode',
;;   on in every buffer Fettle manages): the suggestion is drawn after
;;   point, TAB accepts it, M-f a word, M-e a line, M-n / M-p cycle (with
;;   one suggestion shown they ask for alternatives; with none, for
;;   suggestions), C-g dismisses; typing what it says keeps the rest;
;; - `fettle-chat' (a conversation in `*fettle-chat*': a follow-up
;;   continues it, C-u starts a new one), `fettle-rewrite', `fettle-fix', `fettle-undo',
;;   `fettle-cancel', `fettle-stats', `fettle-log', `fettle-diff', all
;;   asynchronous (eglot's own `eglot-execute-command' waits for the
;;   answer, and a task takes minutes: Emacs would freeze meanwhile);
;;   Fettle's code actions (`eglot-code-actions') run asynchronously too;
;; - the agent's `fettle/taskEvent' notifications in `*fettle-log*'.
;;
;; Setup:
;;
;;   (require 'fettle)
;;   (fettle-register)           ; Fettle for `fettle-modes' in eglot
;;   (add-hook 'python-mode-hook #'eglot-ensure)
;;
;; Eglot runs one server per buffer.  To keep your language's own server
;; (pyright, rust-analyzer, ...) beside Fettle, run both behind an LSP
;; multiplexer (e.g. rassumfrassum: `rass -- pyright-langserver --stdio
;; -- fettle'), or use lsp-mode for the language and eglot for Fettle.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'seq)
(require 'eglot)
(require 'jsonrpc)

(defgroup fettle nil
  "Fettle: a code agent inside the LSP client."
  :group 'tools
  :prefix "fettle-")

(defcustom fettle-command '("fettle")
  "The server's command line."
  :type '(repeat string))

(defcustom fettle-modes
  '(python-mode python-ts-mode rust-mode rust-ts-mode js-mode js-ts-mode
    typescript-mode typescript-ts-mode go-mode go-ts-mode c-mode c++-mode
    java-mode lua-mode ruby-mode sh-mode)
  "Major modes whose buffers `fettle-register' gives to Fettle."
  :type '(repeat symbol))

(defcustom fettle-settings nil
  "Fettle's configuration, sent as `initializationOptions'.
A plist with keyword keys, as in fettle.toml: e.g.
  (:completion (:model \"local\") :agent (:test_command \"pytest -q\"))"
  :type 'sexp)

(defcustom fettle-task-timeout 960
  "Seconds to wait for a task (chat, fix) or a rewrite to answer.
Longer than Fettle's own `agent.timeout_s' (900 s by default)."
  :type 'integer)

(defcustom fettle-confirm-edits nil
  "Whether eglot asks before applying Fettle's edits.
Fettle asks itself when its `edit.confirm' says so; every edit is
one `undo' away."
  :type 'boolean)

(defcustom fettle-show-progress t
  "Non-nil: echo a running task's progress, a line at a time.
Its status and verification events are shown in the echo area while
`*fettle-log*' (which has every event) is not in a window."
  :type 'boolean
  :group 'fettle)

(defclass fettle-server (eglot-lsp-server) ()
  :documentation "Eglot's connection to Fettle.")

;;;###autoload
(defun fettle-register ()
  "Make eglot start Fettle for `fettle-modes'."
  (setq eglot-server-programs
        (cons (cons fettle-modes (cons 'fettle-server fettle-command))
              (cl-remove-if (lambda (entry)
                              (and (consp (cdr entry)) (eq (cadr entry) 'fettle-server)))
                            eglot-server-programs))))

(cl-defmethod eglot-initialization-options ((_server fettle-server))
  (or fettle-settings eglot--{}))

(defun fettle--server (&optional quiet)
  "The Fettle server of this buffer, or an error (nil if QUIET)."
  (let ((server (eglot-current-server)))
    (cond ((and server (cl-typep server 'fettle-server)) server)
          (quiet nil)
          (t (user-error "Fettle is not managing this buffer (M-x eglot, after `fettle-register')")))))

;;; Asynchronous commands

(defvar fettle--last-result nil
  "The result of the last task that ended.")

(defvar fettle--last-change nil
  "The result of the last task that changed files (for `fettle-diff').")

(defun fettle--execute (server command argument &optional on-result on-error)
  "Run COMMAND with ARGUMENT on SERVER; call ON-RESULT with its answer.
ON-ERROR, if given, is called with the error's message too."
  (when (eglot-managed-p)
    (eglot--signal-textDocument/didChange))
  (jsonrpc-async-request
   server :workspace/executeCommand
   (list :command command :arguments (if (vectorp argument) argument (vector argument)))
   :success-fn (lambda (result) (when on-result (funcall on-result result)))
   :error-fn (lambda (err)
               (let ((text (format "%s" (or (plist-get err :message) err))))
                 (message "Fettle: %s" text)
                 (when on-error (funcall on-error text))))
   :timeout fettle-task-timeout
   :timeout-fn (lambda ()
                 (message "Fettle: %s had no answer after %d s" command fettle-task-timeout))))

(cl-defmethod eglot-execute-command ((server fettle-server) command arguments)
  "Run Fettle's COMMAND without waiting: code actions carry rewrites."
  (fettle--execute server (format "%s" command) (or arguments []) #'fettle--report))

(cl-defmethod eglot-handle-request
  ((_server fettle-server) (_method (eql workspace/applyEdit)) &key _label edit)
  "Apply Fettle's edit (see `fettle-confirm-edits'), and say so at once.
Eglot sends `didChange' when Emacs is next idle; the agent waits for
it to know the edit landed, so it goes now."
  (eglot--apply-workspace-edit edit fettle-confirm-edits)
  (seq-doseq (change (plist-get edit :documentChanges))
    (when-let ((path (eglot--uri-to-path (plist-get (plist-get change :textDocument) :uri)))
               (buffer (find-buffer-visiting path)))
      (with-current-buffer buffer
        (when (eglot-managed-p)
          (eglot--signal-textDocument/didChange)))))
  `(:applied t))

(cl-defmethod eglot-client-capabilities ((_server fettle-server))
  "Eglot's capabilities, and that Emacs saves the buffers Fettle edits."
  (let ((caps (cl-call-next-method)))
    (plist-put caps :experimental '(:fettle (:saveDocuments t)))))

(defun fettle--save-buffer (buffer)
  "Save BUFFER for Fettle; nil, or why it was not saved."
  (with-current-buffer buffer
    (cond
     (buffer-read-only "the buffer is read-only")
     (t
      ;; Fettle asks only for files whose text on disk it manages at that
      ;; moment: a changed file on disk is no reason to ask (nor, in
      ;; batch mode, to fail).
      (unless (verify-visited-file-modtime buffer)
        (set-visited-file-modtime))
      (condition-case err
          (let ((save-silently t) (inhibit-message t))
            (basic-save-buffer)
            (when (buffer-modified-p) "the buffer is still modified after saving it"))
        (error (error-message-string err)))))))

(cl-defmethod eglot-handle-request
  ((_server fettle-server) (_method (eql fettle/saveDocuments)) &key uris)
  "Save the buffers Fettle edited, so Emacs knows they are saved."
  (let (saved failed)
    (seq-doseq (uri uris)
      (let* ((buffer (find-buffer-visiting (eglot--uri-to-path uri)))
             (why (if buffer (fettle--save-buffer buffer) "not open in Emacs")))
        (if why
            (push (list :uri uri :message why) failed)
          (push uri saved))))
    (list :saved (vconcat (nreverse saved)) :failed (vconcat (nreverse failed)))))

(defun fettle--report (result)
  "Show the end of a task or rewrite (RESULT), keep it for `fettle-diff'."
  (when (listp result)
    (cond
     ((plist-member result :applied)
      (message "Fettle: %s" (plist-get result :summary)))
     ((plist-get result :status)
      (setq fettle--last-result result)
      ;; `fettle-diff' shows the last change: a follow-up that only
      ;; answered must not hide it.
      (when (> (length (plist-get result :changedFiles)) 0)
        (setq fettle--last-change result))
      (let ((changed (length (plist-get result :changedFiles))))
        (message "Fettle: %s — %s%s" (plist-get result :status)
                 (string-trim (or (plist-get result :summary) ""))
                 (if (> changed 0)
                     (format " (%d file%s changed: M-x fettle-diff shows it, M-x fettle-undo restores it)"
                             changed (if (= changed 1) "" "s"))
                   "")))))))

(defun fettle--whole-lines (beg end)
  "The LSP range of the whole lines from BEG to END."
  (save-excursion
    (let ((start (progn (goto-char beg) (line-beginning-position)))
          (stop (progn (goto-char end)
                       (if (and (bolp) (> end beg)) (point) (line-beginning-position 2)))))
      (list :start (eglot--pos-to-lsp-position start)
            :end (eglot--pos-to-lsp-position stop)))))

;;;###autoload
(defun fettle-rewrite (beg end instruction)
  "Rewrite the lines from BEG to END as INSTRUCTION says."
  (interactive
   (let ((region (if (use-region-p) (list (region-beginning) (region-end))
                   (list (line-beginning-position) (line-end-position)))))
     (append region (list (read-string "Fettle rewrite: ")))))
  (when (string-empty-p (string-trim instruction))
    (user-error "Fettle: say what to change"))
  (let ((server (fettle--server)))
    (deactivate-mark)
    (fettle--execute server "fettle.rewrite"
                     (list :uri (eglot--path-to-uri (buffer-file-name))
                           :range (fettle--whole-lines beg end)
                           :instruction instruction
                           :version eglot--versioned-identifier)
                     #'fettle--report)
    (message "Fettle: rewriting…")))

(defvar fettle--chat-turns 0
  "Chats finished in this conversation (a follow-up continues it).")

(defvar fettle--chat-running nil
  "While a chat runs: a plist (:task ID), ID nil until its first event.")

(defvar fettle--chat-streaming nil
  "Non-nil while the conversation's last line is the model's streamed text.")

;;;###autoload
(defun fettle-chat (message &optional beg end new)
  "Run the repair loop with MESSAGE as its goal; the region is its focus.
It continues the conversation in `*fettle-chat*' (the model is told the
earlier requests, their results and changes), unless NEW (a prefix
argument, \\[universal-argument]) starts a new one."
  (interactive
   (let ((region (when (use-region-p) (list (region-beginning) (region-end)))))
     (list (read-string (if (and (not current-prefix-arg) (> fettle--chat-turns 0))
                            "Fettle chat (follow-up): "
                          "Fettle chat: "))
           (car region) (cadr region) current-prefix-arg)))
  (when (string-empty-p (string-trim message))
    (user-error "Fettle: say what to do, e.g. make the tests pass"))
  (let* ((continued (and (not new) (> fettle--chat-turns 0)))
         (argument (list :message message
                         :uri (eglot--path-to-uri (buffer-file-name))
                         :continue (if continued t :json-false))))
    (when (and beg end)
      (setq argument (append argument (list :range (fettle--whole-lines beg end)))))
    (fettle--chat-begin message continued)
    (fettle--execute (fettle--server) "fettle.chat" argument
                     (lambda (result)
                       (fettle--chat-finish result)
                       (fettle--report result))
                     (lambda (text)
                       (fettle--chat-finish (list :status "error" :summary text))))
    (message "Fettle: working on it (*fettle-chat* shows what it does)")))

;;;###autoload
(defun fettle-fix ()
  "Run the repair loop on this buffer's problems."
  (interactive)
  (fettle--execute (fettle--server) "fettle.fixDiagnostics"
                   (list :uri (eglot--path-to-uri (buffer-file-name)))
                   #'fettle--report)
  (message "Fettle: fixing this file (M-x fettle-log shows what it does)"))

;;;###autoload
(defun fettle-undo (&optional force)
  "Restore every file the last task changed, byte for byte.
A file changed since the task is left alone; with a prefix argument
FORCE (\\[universal-argument] \\[fettle-undo]) it is restored too, and
its later changes are lost."
  (interactive "P")
  (fettle--execute (fettle--server) "fettle.undo" (if force '(:force t) eglot--{})
                   (lambda (result)
                     (message "Fettle: restored %d file(s)"
                              (length (plist-get result :restored))))))

;;;###autoload
(defun fettle-cancel ()
  "Cancel the running task."
  (interactive)
  (fettle--execute (fettle--server) "fettle.cancel" eglot--{}))

;;;###autoload
(defun fettle--models-health (models)
  "MODELS (`fettle/stats' :models) in words: each model's state and why."
  (if (null models)
      "no model health reported (a remote model reports after its first request)"
    (mapconcat (lambda (m)
                 (let ((reason (plist-get m :reason)))
                   (format "model %s %s%s" (plist-get m :model) (plist-get m :state)
                           (if (and reason (not (equal (plist-get m :state) "ok")))
                               (format " (%s)" reason)
                             ""))))
               models "; ")))

(defun fettle-stats ()
  "Show Fettle's local statistics and its models' health (`fettle/stats')."
  (interactive)
  (jsonrpc-async-request
   (fettle--server) :fettle/stats eglot--{}
   :success-fn (lambda (result)
                 (let ((completions (plist-get result :completions))
                       (edit (plist-get result :edit))
                       (models (append (plist-get result :models) nil)))
                   (message "Fettle: %s suggestions shown, %s accepted; %s rewrites, %s applied; %s"
                            (or (plist-get result :shown) (plist-get completions :shown) 0)
                            (or (plist-get result :accepted) (plist-get completions :accepted) 0)
                            (or (plist-get edit :requested) 0)
                            (or (plist-get edit :applied) 0)
                            (fettle--models-health models))))
   :error-fn (lambda (err) (message "Fettle: %s" (plist-get err :message)))))

;;;###autoload
(defun fettle-diff ()
  "Show the diff of the last task that changed files."
  (interactive)
  (let ((diff (plist-get fettle--last-change :diff)))
    (unless (and diff (not (string-empty-p diff)))
      (user-error "Fettle: no finished task with changes in this session"))
    (with-current-buffer (get-buffer-create "*fettle-diff*")
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert diff))
      (diff-mode)
      (setq buffer-read-only t)
      (goto-char (point-min))
      (display-buffer (current-buffer)))))

;;; The conversation: `*fettle-chat*'

(defun fettle--chat-buffer ()
  (let ((buffer (get-buffer-create "*fettle-chat*")))
    (with-current-buffer buffer
      (unless (derived-mode-p 'special-mode)
        (special-mode)))
    buffer))

(defun fettle--chat-insert (text &optional raw)
  "Append TEXT to `*fettle-chat*' as a line of its own, or as it is (RAW:
the model's text as it streams)."
  (with-current-buffer (fettle--chat-buffer)
    (let ((inhibit-read-only t)
          (follow (mapcar (lambda (w) (cons w (= (window-point w) (point-max))))
                          (get-buffer-window-list (current-buffer) nil t))))
      (save-excursion
        (goto-char (point-max))
        (if raw
            (insert text)
          (unless (bolp) (insert "\n"))
          (insert text "\n")))
      (dolist (w follow)
        (when (cdr w) (set-window-point (car w) (point-max)))))))

(defun fettle--chat-begin (message continued)
  "A chat MESSAGE sent; CONTINUED when it follows the earlier ones."
  (unless continued
    (setq fettle--chat-turns 0)
    (when (> (buffer-size (fettle--chat-buffer)) 0)
      (fettle--chat-insert "\n--- new conversation ---")))
  (setq fettle--chat-running (list :task nil)
        fettle--chat-streaming nil)
  (fettle--chat-insert (format "\nYou: %s\n\nFettle:" message))
  (display-buffer (fettle--chat-buffer) '(nil (inhibit-same-window . t))))

(defun fettle--chat-event (task kind text)
  "The running chat's event KIND of TASK with TEXT, in the conversation."
  (when fettle--chat-running
    (let ((text (or text "")))
      (when (and (null (plist-get fettle--chat-running :task))
                 (equal kind "status") (string-prefix-p "Started:" text))
        ;; The agent's first event names the task.
        (setq fettle--chat-running (list :task task)))
      (when (equal task (plist-get fettle--chat-running :task))
        (if (equal kind "text")
            (progn
              (setq fettle--chat-streaming t)
              (fettle--chat-insert text t))
          (setq fettle--chat-streaming nil)
          ;; A step's first line; what follows a status (the suspects, a
          ;; test command's last lines) indented below, a few lines at most.
          (let ((parts (split-string text "\n")))
            (fettle--chat-insert (concat "  · " (car parts)))
            (dolist (line (and (equal kind "status") (seq-take (cdr parts) 8)))
              (fettle--chat-insert (concat "    " line)))))))))

(defun fettle--chat-finish (result)
  "The chat's RESULT: its summary ends the turn."
  (setq fettle--chat-running nil
        fettle--chat-streaming nil)
  (let ((turns (plist-get (plist-get result :conversation) :turns)))
    (cond (turns (setq fettle--chat-turns turns))
          ((plist-get result :taskId) (setq fettle--chat-turns (1+ fettle--chat-turns)))))
  (fettle--chat-insert (format "\n[%s]\n%s" (or (plist-get result :status) "?")
                               (string-trim (or (plist-get result :summary) "")))))

;;; The log of `fettle/taskEvent'

(defvar fettle--log-last-text-task nil
  "The task whose streamed model text the log's last line holds.")

(defun fettle--log-buffer ()
  (let ((buffer (get-buffer-create "*fettle-log*")))
    (with-current-buffer buffer
      (unless (derived-mode-p 'special-mode)
        (special-mode)))
    buffer))

(defun fettle--log-event (task kind text)
  "Append the event KIND of TASK with TEXT to `*fettle-log*'."
  (with-current-buffer (fettle--log-buffer)
    (let ((inhibit-read-only t)
          (follow (mapcar (lambda (w) (cons w (= (window-point w) (point-max))))
                          (get-buffer-window-list (current-buffer) nil t))))
      (save-excursion
        (goto-char (point-max))
        (if (and (equal kind "text") (equal task fettle--log-last-text-task))
            ;; Streamed model text continues the line it started.
            (progn (when (bolp) (delete-char -1))
                   (insert (replace-regexp-in-string "\n" "\n  " text) "\n"))
          (insert (format "[%s] %s: %s\n" task kind
                          (replace-regexp-in-string "\n" "\n  " (or text ""))))))
      (setq fettle--log-last-text-task (and (equal kind "text") task))
      (dolist (w follow)
        (when (cdr w) (set-window-point (car w) (point-max)))))))

(cl-defmethod eglot-handle-notification
  ((_server fettle-server) (_method (eql fettle/taskEvent)) &key taskId kind text &allow-other-keys)
  "Log what the agent or a rewrite did."
  (fettle--log-event taskId kind text)
  (fettle--chat-event taskId kind text)
  (fettle--echo-progress kind text))

(defun fettle--echo-progress (kind text)
  "Echo the first line of TEXT, an event of KIND, as the task's progress."
  (when (and fettle-show-progress
             (member kind '("status" "verify"))
             (not (get-buffer-window "*fettle-log*" t))
             (not (active-minibuffer-window)))
    (let ((line (car (split-string (or text "") "\n")))
          (message-log-max nil))
      (message "Fettle: %s"
               (truncate-string-to-width line (max 20 (- (frame-width) 10)) nil nil "…")))))

;;;###autoload
(defun fettle-log ()
  "Show `*fettle-log*': the model's text, tool calls, results, edits, checks."
  (interactive)
  (pop-to-buffer (fettle--log-buffer)))

(provide 'fettle)

;; Loaded after `provide': fettle-ghost.el requires this file (magit's
;; layout), and at compile time nothing here needs it.
(cl-eval-when (load eval)
  (require 'fettle-ghost))

;;; fettle.el ends here
